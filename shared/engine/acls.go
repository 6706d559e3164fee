package engine

import (
	"context"

	"github.com/mm2go/mm2go/shared/acls"
)

// syncACLs runs MM2's topic ACL sync (package acls) for this flow when SyncTopicACLs is
// set. Like MM2, a failure is logged and does not fail the burst: the copy went through, and
// the next run tries again. [h/config]
func (pn *topicPlanner) syncACLs(ctx context.Context) {
	if !pn.opts.SyncTopicACLs || ctx.Err() != nil {
		return
	}
	res, err := acls.Sync(ctx, pn.src, pn.tgt, pn.selected, func(t string) string {
		return pn.opts.Policy.FormatRemoteTopic(pn.opts.SourceAlias, t)
	}, pn.log)
	if err != nil {
		pn.log.Warn("topic ACLs not synced", "err", err.Error())
		return
	}
	if len(res.Created) > 0 {
		pn.log.Info("topic ACLs synced", "created", len(res.Created))
	}
}
