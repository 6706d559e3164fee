package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/engine"
)

// limitError gives the errors that come from a limit of a cluster, which no later run can get
// past unchanged, the setting and the fix: a replication factor the cluster cannot give is a
// settings error (exit 2) naming the setting that gave it; so are positions lost to the
// offsets topic's retention (engine.PositionsLostError names the choices); a record larger than an Event Hubs
// target takes says that no setting raises that limit and what to do instead (exit 1, as
// before). Other errors are returned as they are.
func limitError(cfg *config.Config, err error) error {
	var (
		rf   *cluster.ReplicationFactorError
		lost *engine.PositionsLostError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &lost):
		return &cli.ConfigError{Err: err}
	case errors.As(err, &rf):
		return &cli.ConfigError{Err: fmt.Errorf("%s: %w", replicationFactorSetting(cfg, rf.Topic), err)}
	case errors.Is(err, kerr.MessageTooLarge) && targetIsEventHubs(cfg):
		return fmt.Errorf("%w: Event Hubs takes events and batches of at most 1 MB on every tier and no setting raises that; "+
			"leave the topic out of the flow (MM2_TOPICS_EXCLUDE, topics.exclude) or have its producers write smaller records", err)
	}
	return err
}

// replicationFactorSetting names the setting that gave the replication factor of topic.
func replicationFactorSetting(cfg *config.Config, topic string) string {
	pol, err := cfg.Policy()
	offsets := cfg.OffsetStorageTopic
	if offsets == "" {
		offsets = "mm2-offsets." + cfg.SourceAlias + ".internal"
	}
	switch {
	case topic == offsets:
		return "MM2_OFFSET_STORAGE_REPLICATION_FACTOR (offset.storage.replication.factor)"
	case err == nil && (topic == pol.OffsetSyncsTopic(cfg.TargetAlias) || topic == pol.OffsetSyncsTopic(cfg.SourceAlias)):
		return "MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR (offset-syncs.topic.replication.factor)"
	case err == nil && topic == pol.CheckpointsTopic(cfg.SourceAlias):
		return "MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR (checkpoints.topic.replication.factor)"
	case err == nil && topic == pol.HeartbeatsTopic():
		return "MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR (heartbeats.topic.replication.factor)"
	}
	return "MM2_REPLICATION_FACTOR (replication.factor)"
}

func targetIsEventHubs(cfg *config.Config) bool {
	p, err := cluster.SettingsProfile(cfg.Target)
	return err == nil && p.EventHubs
}

// checkTransactions refuses exactly-once (MM2_EXACTLY_ONCE) up front, as a settings error, when
// the target does not advertise the transaction APIs (Event Hubs Standard has none): without
// the check every partition's transaction fails at its commit and the burst retries it until
// its retry budget is spent. A target that cannot be asked is left to the burst.
func checkTransactions(ctx context.Context, cfg *config.Config, dial engine.DialFunc) error {
	if !cfg.ExactlyOnce {
		return nil
	}
	cl, err := dial(ctx, engine.Target)
	if err != nil {
		return nil
	}
	defer cl.Close()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return nil
	}
	var missing []string
	for _, v := range vs {
		if v.Err != nil {
			return nil
		}
		for _, k := range []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.EndTxn} {
			if _, _, ok := v.KeyVersions(int16(k)); !ok {
				missing = append(missing, k.Name())
			}
		}
		break
	}
	if len(missing) == 0 {
		return nil
	}
	what := fmt.Sprintf("cluster %q", cfg.TargetAlias)
	fix := "unset it (at-least-once: a crash re-copies at most the records after the last stored position)"
	if p, err := cluster.SettingsProfile(cfg.Target); err == nil && p.EventHubs {
		what = fmt.Sprintf("cluster %q (Event Hubs, tier %s)", cfg.TargetAlias, p.Tier)
		fix += ", or use a namespace whose tier has Kafka transactions (Premium or Dedicated, in preview) and set MM2_TARGET_EVENTHUBS_TIER"
	}
	return &cli.ConfigError{Err: fmt.Errorf("MM2_EXACTLY_ONCE=true (exactly.once.source.support): the target %s does not support transactions (it does not offer %s): %s",
		what, strings.Join(missing, ", "), fix)}
}
