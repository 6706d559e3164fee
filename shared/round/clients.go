package round

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Clients are the two clients a periodic job keeps between its rounds, with their admin
// views. Close releases both.
type Clients struct {
	Src, Tgt       *kgo.Client
	SrcAdm, TgtAdm *kadm.Client
}

// Dial builds a flow's source and target clients for the job called name. The flow's
// aliases name the cluster in errors; srcOpts and tgtOpts are passed to each ClientFunc.
// Nothing is sent to a cluster: franz-go connects on the first request.
func Dial(ctx context.Context, name string, source, target cluster.ClientFunc, sourceAlias, targetAlias string, srcOpts, tgtOpts []kgo.Opt) (Clients, error) {
	if source == nil || target == nil {
		return Clients{}, errors.New(name + ": source and target client functions are required")
	}
	src, err := source(ctx, srcOpts...)
	if err != nil {
		return Clients{}, fmt.Errorf("source cluster %q client: %w", sourceAlias, err)
	}
	tgt, err := target(ctx, tgtOpts...)
	if err != nil {
		src.Close()
		return Clients{}, fmt.Errorf("target cluster %q client: %w", targetAlias, err)
	}
	return Clients{Src: src, Tgt: tgt, SrcAdm: kadm.NewClient(src), TgtAdm: kadm.NewClient(tgt)}, nil
}

// Close releases the job's clients.
func (c Clients) Close() {
	c.Src.Close()
	c.Tgt.Close()
}

// PingTimeout bounds each cluster's answer to Ping.
const PingTimeout = 15 * time.Second

// Ping checks that the flow's clusters answer a metadata request within PingTimeout: the
// source only when source is true, the target always. A cluster that does not answer (also
// when ctx ends first) is an *UnavailableError, its error explained by f.
//
// The request goes to the cluster every time: kadm's BrokerMetadata answers from the
// client's known brokers once it has any, which a hung cluster passed.
func (c Clients) Ping(ctx context.Context, f *Flow, source bool) error {
	type side struct {
		name, alias string
		cl          *kgo.Client
	}
	sides := []side{{"target", f.TargetAlias, c.Tgt}}
	if source {
		sides = []side{{"source", f.SourceAlias, c.Src}, sides[0]}
	}
	for _, s := range sides {
		pctx, cancel := context.WithTimeout(ctx, PingTimeout)
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
		_, err := req.RequestWith(pctx, s.cl)
		cancel()
		if err != nil {
			return &UnavailableError{Cluster: s.name, Alias: s.alias, Err: f.Explain(s.name, err)}
		}
	}
	return nil
}
