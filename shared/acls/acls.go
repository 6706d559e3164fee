// Package acls copies topic ACLs from the source cluster to the target as MirrorMaker 2's
// MirrorSourceConnector does (sync.topic.acls.enabled, default true): the source's ACL
// bindings on TOPIC resources with a LITERAL pattern, for topics the flow replicates, are
// created on the remote topic names on the target, except ALLOW WRITE bindings (only the
// replicator writes remote topics), and with ALLOW ALL narrowed to ALLOW READ. ACLs are never
// deleted from the target. A source without an authorizer is skipped with one INFO line.
//
// Checked against MirrorSourceConnector.syncTopicAcls, listTopicAclBindings,
// shouldReplicateAcl and targetAclBinding of Kafka 4.1.1.
package acls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Binding is one ACL binding on a topic.
type Binding struct {
	Topic      string
	Principal  string
	Host       string
	Operation  kmsg.ACLOperation
	Permission kmsg.ACLPermissionType
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s %s from %s on topic %q", b.Permission, b.Principal, b.Operation, b.Host, b.Topic)
}

// Result says what one Sync did.
type Result struct {
	// NoAuthorizer is true when the source has no authorizer (nothing to copy).
	NoAuthorizer bool
	// Source counts the source's topic ACL bindings read; Created lists the bindings sent
	// to the target (creating an existing binding is a no-op for Kafka).
	Source  int
	Created []Binding
}

// Sync copies the ACLs of the source topics for which selected is true (MM2's
// shouldReplicateTopic: filter, not internal, no cycle) to the target, on the names remote
// gives (the policy's formatRemoteTopic). src and tgt are clients of the two clusters
// (*kgo.Client).
func Sync(ctx context.Context, src, tgt kmsg.Requestor, selected func(topic string) bool, remote func(topic string) string, logger *slog.Logger) (Result, error) {
	var res Result
	bindings, err := describe(ctx, src)
	if errors.Is(err, kerr.SecurityDisabled) {
		res.NoAuthorizer = true
		logger.Info("no ACL authorizer is configured on the source cluster, so no topic ACLs are synced; set sync.topic.acls.enabled=false (MM2_SYNC_TOPIC_ACLS_ENABLED=false) to skip this")
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("describing the source's topic ACLs: %w", err)
	}
	res.Source = len(bindings)
	var out []Binding
	for _, b := range bindings {
		if b.pattern != kmsg.ACLResourcePatternTypeLiteral || !Replicated(b.Binding) || !selected(b.Topic) {
			continue
		}
		out = append(out, Target(b.Binding, remote(b.Topic)))
	}
	if len(out) == 0 {
		return res, nil
	}
	if err := create(ctx, tgt, out); err != nil {
		return res, fmt.Errorf("creating topic ACLs on the target: %w", err)
	}
	res.Created = out
	logger.Debug("topic ACLs synced", "source_bindings", res.Source, "created", len(out))
	return res, nil
}

// Replicated is MM2's shouldReplicateAcl: every binding but ALLOW WRITE.
func Replicated(b Binding) bool {
	return !(b.Permission == kmsg.ACLPermissionTypeAllow && b.Operation == kmsg.ACLOperationWrite)
}

// Target is MM2's targetAclBinding: the binding on the remote topic (a LITERAL pattern), with
// ALLOW ALL narrowed to ALLOW READ.
func Target(b Binding, remoteTopic string) Binding {
	b.Topic = remoteTopic
	if b.Permission == kmsg.ACLPermissionTypeAllow && b.Operation == kmsg.ACLOperationAll {
		b.Operation = kmsg.ACLOperationRead
	}
	return b
}

type sourceBinding struct {
	Binding
	pattern kmsg.ACLResourcePatternType
}

// describe lists every ACL binding on topics (any pattern type), as MM2's ANY_TOPIC_ACL filter.
func describe(ctx context.Context, cl kmsg.Requestor) ([]sourceBinding, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if resp.ErrorMessage != nil {
			return nil, fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
		return nil, err
	}
	var out []sourceBinding
	for _, r := range resp.Resources {
		if r.ResourceType != kmsg.ACLResourceTypeTopic {
			continue
		}
		for _, a := range r.ACLs {
			out = append(out, sourceBinding{Binding{Topic: r.ResourceName, Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType}, r.ResourcePatternType})
		}
	}
	return out, nil
}

// create creates the bindings on the target; the first failure is returned (MM2 logs each
// failed binding and goes on, which the caller does with the error).
func create(ctx context.Context, cl kmsg.Requestor, bs []Binding) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = kmsg.ACLResourceTypeTopic
		c.ResourceName = b.Topic
		c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
		c.Principal = b.Principal
		c.Host = b.Host
		c.Operation = b.Operation
		c.PermissionType = b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var errs []error
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && i < len(bs) {
			errs = append(errs, fmt.Errorf("%s: %w", bs[i], err))
		}
	}
	return errors.Join(errs...)
}
