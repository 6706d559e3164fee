package round

import (
	"time"

	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/policy"
)

// Flow is what the options of every periodic job (checkpoint, heartbeat) share: the flow's
// aliases and naming, where MM2's Connect offsets go, and the job's hooks. Zero values mean
// the default named in each field's comment.
type Flow struct {
	// SourceAlias and TargetAlias are MM2's source.cluster.alias and target.cluster.alias.
	// Required, and different.
	SourceAlias, TargetAlias string
	// Policy names remote and internal topics. Nil means MM2's DefaultReplicationPolicy.
	Policy policy.Policy

	// WriteConnectOffsets writes the source offset MM2's connector for the job writes
	// (MirrorCheckpointConnector, MirrorHeartbeatConnector: {"offset":0} under the job's
	// own partition key) next to each record the job writes, into the Connect offsets topic
	// of the cluster written to, when that topic exists. Nothing reads them; real MM2
	// writes them, and a team switching back finds what it expects.
	WriteConnectOffsets bool
	// OffsetStorageTopic is the flow's Connect offsets topic on the target; "" means
	// mm2-offsets.<SourceAlias>.internal.
	OffsetStorageTopic string

	// Metrics records what each round measures (checkpoint latency, replication latency);
	// nil records nothing.
	Metrics *metrics.Recorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ExplainConnectError, if set, rewrites a failure to reach the "source" or "target"
	// cluster into a message naming its alias and bootstrap servers
	// (config.Config.ConnectError); nil leaves errors as they are.
	ExplainConnectError func(cluster string, err error) error
}

// Defaults checks the flow and fills in its defaults; what names the options in errors
// ("checkpoint options").
func (f *Flow) Defaults(what string) error {
	var err error
	if f.Policy, err = policy.CheckFlow(what, f.SourceAlias, f.TargetAlias, f.Policy); err != nil {
		return err
	}
	if f.OffsetStorageTopic == "" {
		f.OffsetStorageTopic = "mm2-offsets." + f.SourceAlias + ".internal"
	}
	if f.Now == nil {
		f.Now = time.Now
	}
	return nil
}

// Explain explains a failure to reach cluster ("source" or "target") with
// ExplainConnectError, when set.
func (f *Flow) Explain(cluster string, err error) error {
	if f.ExplainConnectError == nil {
		return err
	}
	return f.ExplainConnectError(cluster, err)
}
