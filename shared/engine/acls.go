package engine

import (
	"context"

	"github.com/mm2go/mm2go/shared/acls"
)

// syncTopicACLs runs MM2's topic ACL sync (package acls) for this flow when SyncTopicACLs is
// set. Like MM2, a failure is logged and does not fail the burst: the copy went through, and
// the next run tries again. [h/config]
func (e *Engine) syncTopicACLs(ctx context.Context) {
	if !e.opts.SyncTopicACLs || ctx.Err() != nil {
		return
	}
	res, err := acls.Sync(ctx, e.src, e.tgt, e.Selected, func(t string) string {
		return e.opts.Policy.FormatRemoteTopic(e.opts.SourceAlias, t)
	}, e.log)
	if err != nil {
		e.log.Warn("topic ACLs not synced", "err", err.Error())
		return
	}
	if len(res.Created) > 0 {
		e.log.Info("topic ACLs synced", "created", len(res.Created))
	}
}
