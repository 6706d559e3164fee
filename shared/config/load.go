package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"text/template"

	"github.com/kelseyhightower/envconfig"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/policy"
)

// ValidationError lists every invalid setting found by Load.
type ValidationError struct {
	Problems []*cluster.SettingError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems):", len(e.Problems))
	if len(e.Problems) == 1 {
		b.Reset()
		b.WriteString("invalid configuration:")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, for errors.As on *cluster.SettingError.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// Load builds the Config from defaults, the MM2 properties file named by
// MM2_CONFIG_FILE (if any) and the environment, read through lookupEnv
// (os.LookupEnv in mains), in increasing precedence. A variable that is set
// but empty counts as set (as in envconfig). Every invalid setting is
// reported in one *ValidationError; file and flow problems are returned
// alone. logger (nil: discard) gets debug lines on what the file provided
// and which of its keys mm2go ignores.
func Load(lookupEnv func(string) (string, bool), logger *slog.Logger) (*Config, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, ignored, err := load(lookupEnv, logger)
	if err != nil {
		return nil, err
	}
	warnIgnored(logger, ignored)
	return c, nil
}

// LoadFlows is Load for the run commands: when MM2_CONFIG_FILE enables several flows and
// MM2_FLOW chooses none, it loads every enabled flow (as MM2 dedicated mode runs them all), in
// file order; otherwise it returns Load's one flow. A key is reported as ignored only when no
// flow reads it. With IdentityReplicationPolicy, enabled flows that form a cycle (A->B, B->A)
// are refused: that policy cannot tell a remote topic from a local one, so records would go
// round for ever (DefaultReplicationPolicy prevents it by name, see policy.IsCycle).
func LoadFlows(lookupEnv func(string) (string, bool), logger *slog.Logger) ([]*Config, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, ignored, err := load(lookupEnv, logger)
	var several *SeveralFlowsError
	if !errors.As(err, &several) {
		if err != nil {
			return nil, err
		}
		warnIgnored(logger, ignored)
		return []*Config{c}, nil
	}
	var cfgs []*Config
	count := map[string]int{}
	var keys []ignoredKey
	var problems []string
	for _, flow := range several.Flows {
		env := func(k string) (string, bool) {
			if k == "MM2_FLOW" {
				return flow, true
			}
			return lookupEnv(k)
		}
		c, ignored, err := load(env, logger)
		if err != nil {
			problems = append(problems, fmt.Sprintf("flow %s: %v", flow, err))
			continue
		}
		cfgs = append(cfgs, c)
		for _, k := range ignored {
			if count[k.key]++; count[k.key] == 1 {
				keys = append(keys, k)
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	var all []ignoredKey
	for _, k := range keys {
		if count[k.key] == len(cfgs) {
			all = append(all, k)
		}
	}
	if err := identityCycle(cfgs); err != nil {
		return nil, err
	}
	warnIgnored(logger, all)
	return cfgs, nil
}

// identityCycle refuses flows that form a cycle under IdentityReplicationPolicy.
func identityCycle(cfgs []*Config) error {
	next := map[string][]string{}
	identity := ""
	for _, c := range cfgs {
		if id, _ := policy.IsIdentity(c.ReplicationPolicyClass); id {
			identity = c.ReplicationPolicyClass
			next[c.SourceAlias] = append(next[c.SourceAlias], c.TargetAlias)
		}
	}
	// Depth-first search for a path back to the start.
	var path []string
	var visit func(a string, seen map[string]bool) bool
	visit = func(a string, seen map[string]bool) bool {
		path = append(path, a)
		if seen[a] {
			return true
		}
		seen[a] = true
		for _, b := range next[a] {
			if visit(b, seen) {
				return true
			}
		}
		seen[a] = false
		path = path[:len(path)-1]
		return false
	}
	for _, c := range cfgs {
		path = path[:0]
		if visit(c.SourceAlias, map[string]bool{}) {
			// path ends with the repeated alias; show the loop from it.
			last := path[len(path)-1]
			i := slices.Index(path, last)
			return fmt.Errorf("replication.policy.class=%s cannot detect replication cycles, and the enabled flows form one (%s): records would be copied round for ever; use DefaultReplicationPolicy, or enable only one direction", identity, strings.Join(path[i:], "->"))
		}
	}
	return nil
}

// warnIgnored names each ignored key once.
func warnIgnored(logger *slog.Logger, ignored []ignoredKey) {
	for _, k := range ignored {
		logger.Warn("MM2 property ignored", "key", k.key, "verdict", string(k.verdict), "why", k.why)
	}
}

// load is Load without the WARN lines: it returns the keys the flow ignores.
func load(lookupEnv func(string) (string, bool), logger *slog.Logger) (*Config, []ignoredKey, error) {
	var resolved []resolvedRef
	c, ignored, err := loadResolving(lookupEnv, logger, &resolved)
	return c, ignored, redactResolved(err, resolved)
}

// loadResolving is load; it sets *resolved to the values config providers resolved.
func loadResolving(lookupEnv func(string) (string, bool), logger *slog.Logger, resolved *[]resolvedRef) (*Config, []ignoredKey, error) {
	var ignoredKeys []ignoredKey
	c := &Config{}
	settings := settingsOf(c)

	path, _ := lookupEnv("MM2_CONFIG_FILE")
	flow, _ := lookupEnv("MM2_FLOW")
	var file *mm2File
	if path != "" {
		var err error
		if file, err = loadMM2File(path, flow, lookupEnv, logger); err != nil {
			return nil, nil, err
		}
		*resolved = file.resolved
		logger.Debug("loaded MM2 properties file", "file", path, "flow", file.source+"->"+file.target, "clusters", file.clusters)
	} else if flow != "" {
		src, tgt, ok := flowFromString(flow)
		if !ok {
			return nil, nil, &ValidationError{Problems: []*cluster.SettingError{{Env: "MM2_FLOW", Problem: fmt.Sprintf("%q is not <source alias>-><target alias>", flow)}}}
		}
		// Without a file, MM2_FLOW only names the aliases.
		file = &mm2File{props: map[string]string{}, used: map[string]bool{}, source: src, target: tgt}
	}

	type origin int
	const (
		invalid origin = iota
		fromDefault
		fromFile
		fromEnv
	)
	var problems []*cluster.SettingError
	origins := make([]origin, len(settings))
	raws := make([]string, len(settings))
	for i := range settings {
		s := &settings[i]
		raw, ok := lookupEnv(s.env)
		origins[i] = fromEnv
		if !ok && file != nil {
			raw, ok = file.lookup(s)
			origins[i] = fromFile
		}
		if !ok {
			raw, ok = s.def, s.hasDef
			origins[i] = fromDefault
		}
		if ok {
			raws[i] = raw
			if err := s.set(raw); err != nil {
				origins[i] = invalid
				raws[i] = ""
				problems = append(problems, &cluster.SettingError{Env: s.env, Problem: err.Error()}) // property filled in below
				if s.hasDef {
					// Keep validate from reporting the field again.
					_ = s.set(s.def)
				}
			}
		}
	}
	// Property names of cluster settings depend on the aliases: fill them
	// in now that the aliases are known.
	for _, p := range problems {
		for i := range settings {
			if settings[i].env == p.Env {
				p.Property = settings[i].property(c)
			}
		}
	}
	if file != nil && file.path != "" {
		refused, ignored := file.classify()
		if len(refused) > 0 {
			e := &RefusedKeyError{File: file.path}
			for _, k := range refused {
				e.Keys = append(e.Keys, k.key+": "+k.why)
			}
			return nil, nil, e
		}
		ignoredKeys = ignored
	}

	// Kafka ignores sasl.* unless security.protocol is SASL_*; MM2 files
	// rely on that when top-level sasl.* keys (copied to every cluster)
	// are meant for one cluster only. So SASL settings that came from the
	// file are dropped for a cluster whose final protocol is not SASL;
	// from the environment they stay, and Normalize reports the missing
	// protocol.
	for _, cl := range []struct {
		role string
		s    *cluster.Settings
	}{{"source", &c.Source}, {"target", &c.Target}} {
		switch strings.ToUpper(strings.TrimSpace(cl.s.SecurityProtocol)) {
		case cluster.ProtocolSASLPlaintext, cluster.ProtocolSASLSSL:
			continue
		}
		for i := range settings {
			s := &settings[i]
			if origins[i] == fromFile && s.scope == "cluster" && s.role == cl.role && strings.HasPrefix(s.prop, "sasl.") {
				s.field.Set(reflect.Zero(s.field.Type()))
				origins[i], raws[i] = fromDefault, ""
				logger.Debug("ignoring SASL setting: the cluster's security.protocol is not SASL_*", "setting", s.env)
			}
		}
	}

	// A ${...} left in a file value means a provider or key was missing.
	for i := range settings {
		s := &settings[i]
		if origins[i] != fromFile || (s.scope == "cluster" && s.prop == "bootstrap.servers") {
			continue // cluster.Settings.Normalize reports bootstrap addresses
		}
		if ref := providerRef.FindString(raws[i]); ref != "" {
			msg := fmt.Sprintf("unresolved config provider reference %q: check config.providers and the referenced file/key/variable", ref)
			if s.isSecret {
				msg = "contains an unresolved config provider reference (value not shown): check config.providers and the referenced file/key/variable"
			}
			problems = append(problems, &cluster.SettingError{Env: s.env, Property: s.property(c), Problem: msg})
		}
	}

	problems = append(problems, c.validate()...)
	if len(problems) > 0 {
		return nil, nil, &ValidationError{Problems: problems}
	}
	return c, ignoredKeys, nil
}

// validate checks flow settings, fills derived values and normalizes the
// clusters.
func (c *Config) validate() []*cluster.SettingError {
	var errs []*cluster.SettingError
	bad := func(env, prop, format string, args ...any) {
		errs = append(errs, &cluster.SettingError{Env: env, Property: prop, Problem: fmt.Sprintf(format, args...)})
	}
	c.SourceAlias, c.TargetAlias = strings.TrimSpace(c.SourceAlias), strings.TrimSpace(c.TargetAlias)
	if c.SourceAlias == "" {
		bad("MM2_SOURCE_ALIAS", "source.cluster.alias", "must not be empty")
	}
	if c.TargetAlias == "" {
		bad("MM2_TARGET_ALIAS", "target.cluster.alias", "must not be empty")
	}
	if c.SourceAlias != "" && c.SourceAlias == c.TargetAlias {
		bad("MM2_TARGET_ALIAS", "target.cluster.alias", "must differ from the source alias %q", c.SourceAlias)
	}
	c.Source.Alias, c.Target.Alias = c.SourceAlias, c.TargetAlias
	c.Source.Role, c.Target.Role = "source", "target"
	errs = append(errs, c.Source.Normalize("MM2_SOURCE_", c.SourceAlias+".")...)
	errs = append(errs, c.Target.Normalize("MM2_TARGET_", c.TargetAlias+".")...)

	if _, err := c.TopicFilter(); err != nil {
		errs = append(errs, patternProblem(err))
	}
	if _, err := c.GroupFilter(); err != nil {
		errs = append(errs, patternProblem(err))
	}
	if _, err := filter.NewList(filter.Setting{Property: "config.properties.exclude", Env: "MM2_CONFIG_PROPERTIES_EXCLUDE"}, c.ConfigPropertiesExclude); err != nil {
		errs = append(errs, patternProblem(err))
	}
	if c.ReplicationPolicySeparator == "" {
		bad("MM2_REPLICATION_POLICY_SEPARATOR", "replication.policy.separator", "must not be empty")
	}
	if _, err := c.Policy(); err != nil {
		bad("MM2_REPLICATION_POLICY_CLASS", "replication.policy.class", "unknown class %q (want %s or %s)", c.ReplicationPolicyClass, policy.DefaultClass, policy.IdentityClass)
	}

	enum := func(env, prop string, v *string, allowed ...string) {
		*v = strings.ToLower(strings.TrimSpace(*v))
		for _, a := range allowed {
			if *v == a {
				return
			}
		}
		bad(env, prop, "unknown value %q (want %s)", *v, strings.Join(allowed, ", "))
	}
	enum("MM2_OFFSET_SYNCS_TOPIC_LOCATION", "offset-syncs.topic.location", &c.OffsetSyncsTopicLocation, "source", "target")
	enum("MM2_EVENT_MODE", "event.mode", &c.EventMode, "fetch", "payload")
	enum("MM2_CHECKPOINT_TRANSLATION", "checkpoint.translation", &c.CheckpointTranslation, "mm2", "precise")
	enum("MM2_EVENT_KEY_TYPE", "event.key.type", &c.EventKeyType, "string", "int", "float", "byte-array")
	if strings.EqualFold(c.LogLevel, "warning") {
		c.LogLevel = "warn"
	}
	enum("MM2_LOG_LEVEL", "log.level", &c.LogLevel, "debug", "info", "warn", "error")
	enum("MM2_LOG_FORMAT", "log.format", &c.LogFormat, "auto", "json", "text")

	for _, rf := range []struct {
		env, prop string
		v         int
	}{
		{"MM2_REPLICATION_FACTOR", "replication.factor", c.ReplicationFactor},
		{"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR", "offset-syncs.topic.replication.factor", c.OffsetSyncsTopicReplicationFactor},
		{"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR", "checkpoints.topic.replication.factor", c.CheckpointsTopicReplicationFactor},
		{"MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR", "heartbeats.topic.replication.factor", c.HeartbeatsTopicReplicationFactor},
		{"MM2_OFFSET_STORAGE_REPLICATION_FACTOR", "offset.storage.replication.factor", c.OffsetStorageReplicationFactor},
		{"MM2_OFFSET_STORAGE_PARTITIONS", "offset.storage.partitions", c.OffsetStoragePartitions},
	} {
		if rf.v == 0 || rf.v < -1 || rf.v > 32767 {
			bad(rf.env, rf.prop, "%d is invalid (want -1 for the broker default, or 1 to 32767)", rf.v)
		}
	}
	if c.OffsetLagMax < 0 {
		bad("MM2_OFFSET_LAG_MAX", "offset.lag.max", "must not be negative")
	}
	if c.BurstMaxDuration < 0 {
		bad("MM2_BURST_MAX_DURATION", "burst.max.duration", "must not be negative")
	}
	if c.InflightMaxBytes < 0 {
		bad("MM2_INFLIGHT_MAX_BYTES", "inflight.max.bytes", "must not be negative")
	}
	if c.BurstMaxRecords < 0 {
		bad("MM2_BURST_MAX_RECORDS", "burst.max.records", "must not be negative")
	}
	c.LagGroup, c.BurstGroup = strings.TrimSpace(c.LagGroup), strings.TrimSpace(c.BurstGroup)
	if c.LagGroup != "" && c.LagGroup == c.BurstGroup {
		bad("MM2_LAG_GROUP", "lag.group", "must differ from MM2_BURST_GROUP %q (a burst group has members; commits from outside it are refused)", c.BurstGroup)
	}
	c.validateClients(bad)
	if c.Port < 1 || c.Port > 65535 {
		bad("PORT", "", "%d is not a TCP port", c.Port)
	}
	if c.OffsetStorageTopic = strings.TrimSpace(c.OffsetStorageTopic); c.OffsetStorageTopic == "" {
		c.OffsetStorageTopic = "mm2-offsets." + c.SourceAlias + ".internal"
	}
	return errs
}

func patternProblem(err error) *cluster.SettingError {
	var pe *filter.PatternError
	if errors.As(err, &pe) {
		return &cluster.SettingError{Env: pe.Setting.Env, Property: pe.Setting.Property, Problem: fmt.Sprintf("pattern %q: %s", pe.Pattern, pe.Reason)}
	}
	return &cluster.SettingError{Env: "MM2_TOPICS", Property: "topics", Problem: err.Error()}
}

// Policy returns the replication policy the settings select.
func (c *Config) Policy() (policy.Policy, error) {
	return policy.New(c.ReplicationPolicyClass, c.ReplicationPolicySeparator, c.ReplicationPolicyInternalTopicSeparatorEnabled, c.SourceAlias)
}

// TopicFilter returns the filter of topics and topics.exclude.
func (c *Config) TopicFilter() (*filter.Filter, error) {
	return filter.Topics(c.Topics, c.TopicsExclude)
}

// GroupFilter returns the filter of groups and groups.exclude.
func (c *Config) GroupFilter() (*filter.Filter, error) {
	return filter.Groups(c.Groups, c.GroupsExclude)
}

// usageFormat is an envconfig usage template listing, per setting the function reads, the
// variable, the MM2 property, the default and the description.
const usageFormat = `mm2go reads its settings from the environment and, if MM2_CONFIG_FILE is set,
first from that MM2 properties file (the environment wins). In parentheses: the
MM2 property name in the file; <source> and <target> are the flow's cluster
aliases. Secrets are never logged.
{{range .}}{{if reads .Key}}
{{.Key}}{{with property .Key}}  ({{.}}){{end}}
    {{.Tags.Get "desc"}}{{with default .Key}}
    default: {{.}}{{end}}
{{end}}{{end}}`

// EnvNames lists the environment variable of every setting, in the order Usage prints them.
// Deployment manifests are checked against it, so a renamed setting breaks the build rather
// than a deployment.
func EnvNames() []string { return EnvNamesOf("") }

// EnvNamesOf lists the environment variables of the settings function ("mirror",
// "checkpoint", "heartbeat") reads, in the order UsageOf prints them; "" lists every setting.
func EnvNamesOf(function string) []string {
	settings := settingsOf(&Config{})
	names := make([]string, 0, len(settings))
	for _, s := range settings {
		if s.readBy(function) {
			names = append(names, s.env)
		}
	}
	return names
}

// Functions are the names of mm2go's functions, as the fn tags and UsageOf name them.
var Functions = []string{"mirror", "checkpoint", "heartbeat"}

// Usage writes every setting (variable, MM2 property, default, description) to w.
func Usage(w io.Writer) error { return UsageOf(w, "") }

// UsageOf writes the settings function reads (variable, MM2 property, default, description)
// to w, for its -h; "" writes every setting.
func UsageOf(w io.Writer, function string) error { return UsageOfCommand(w, function, "") }

// UsageOfCommand writes the settings that function's sub-command cmd reads: those UsageOf
// lists for function, less those whose cmd tag names other sub-commands only ("": all).
func UsageOfCommand(w io.Writer, function, cmd string) error {
	spec := &Config{}
	byEnv := map[string]*setting{}
	settings := settingsOf(spec)
	for i := range settings {
		byEnv[settings[i].env] = &settings[i]
	}
	names := &Config{SourceAlias: "<source>", TargetAlias: "<target>"}
	tmpl, err := template.New("usage").Funcs(template.FuncMap{
		"reads": func(env string) bool {
			s := byEnv[env]
			return s != nil && s.readBy(function) && s.readByCommand(cmd)
		},
		"property": func(env string) string {
			if s := byEnv[env]; s != nil && s.prop != "" {
				return s.property(names)
			}
			return ""
		},
		"default": func(env string) string {
			s := byEnv[env]
			switch {
			case s == nil:
				return ""
			case s.defDoc != "":
				return s.defDoc
			case s.hasDef && s.def == "":
				return `""`
			case s.hasDef:
				return s.def
			}
			return ""
		},
	}).Parse(usageFormat)
	if err != nil {
		return err
	}
	return envconfig.Usaget("", spec, w, tmpl)
}
