package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// legacyKeys are Kafka 3.x names still found in MM2 files; the new name
// wins when both are set.
var legacyKeys = map[string]string{
	"topics.exclude":            "topics.blacklist",
	"groups.exclude":            "groups.blacklist",
	"config.properties.exclude": "config.properties.blacklist",
}

// mm2File is a parsed, provider-resolved MM2 properties file and the flow
// chosen from it.
type mm2File struct {
	path           string
	props          map[string]string
	order          []string // keys in file order
	used           map[string]bool
	clusters       []string
	allFlows       []string          // every enabled flow, "A->B"
	renamed        map[string]string // connector-style files: loader key -> the file's key
	source, target string
	resolved       []resolvedRef // values config providers resolved (kept out of errors)
}

// flowFromString parses "A->B".
func flowFromString(s string) (src, tgt string, ok bool) {
	src, tgt, ok = strings.Cut(strings.TrimSpace(s), "->")
	src, tgt = strings.TrimSpace(src), strings.TrimSpace(tgt)
	return src, tgt, ok && src != "" && tgt != "" && !strings.Contains(tgt, "->")
}

// loadMM2File reads path, resolves config providers and picks the flow:
// flow ("A->B" from MM2_FLOW) if not empty, else the only enabled flow.
func loadMM2File(path, flow string, lookupEnv func(string) (string, bool), logger *slog.Logger) (*mm2File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading MM2 properties file: %w", err)
	}
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "{") {
		return nil, fmt.Errorf("%s looks like a JSON Connect connector config: write its \"config\" entries as a properties file, one key=value a line (source.cluster.alias=A, source.cluster.bootstrap.servers=..., target.cluster.alias=B, target.cluster.bootstrap.servers=..., topics=...)", path)
	}
	list, err := parseProperties(data)
	if err != nil {
		return nil, fmt.Errorf("parsing MM2 properties file %s: %w", path, err)
	}
	f := &mm2File{path: path, props: map[string]string{}, used: map[string]bool{}}
	for _, p := range list {
		if _, dup := f.props[p.key]; !dup {
			f.order = append(f.order, p.key)
		}
		f.props[p.key] = p.value
	}

	provs, err := newProviders(f.props, f.used, lookupEnv, logger)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for k, v := range f.props {
		if strings.HasPrefix(k, "config.providers") || !strings.Contains(v, "${") {
			continue
		}
		r, err := provs.resolve(v)
		if err != nil {
			return nil, fmt.Errorf("%s: resolving %s: %w", path, k, err)
		}
		f.props[k] = r
	}
	f.resolved = provs.resolved

	if err := f.fromConnectorStyle(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if v, ok := f.get("clusters"); ok {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				f.clusters = append(f.clusters, c)
			}
		}
	}
	enabled := f.enabledFlows()
	f.allFlows = enabled
	if flow != "" {
		src, tgt, ok := flowFromString(flow)
		if !ok {
			return nil, fmt.Errorf("MM2_FLOW %q is not <source alias>-><target alias>", flow)
		}
		if f.clusters != nil && (!slices.Contains(f.clusters, src) || !slices.Contains(f.clusters, tgt)) {
			return nil, fmt.Errorf("MM2_FLOW %q: %s lists clusters=%s", flow, path, strings.Join(f.clusters, ","))
		}
		f.source, f.target = src, tgt
		if !slices.Contains(enabled, src+"->"+tgt) {
			logger.Debug("MM2_FLOW names a flow the file does not enable; running it anyway", "flow", flow, "file", path)
		}
		return f, nil
	}
	switch len(enabled) {
	case 0:
		return nil, fmt.Errorf("%s enables no flow: set <source>-><target>.enabled=true, or choose a flow with MM2_FLOW", path)
	case 1:
		f.source, f.target, _ = flowFromString(enabled[0])
		return f, nil
	}
	return nil, &SeveralFlowsError{File: path, Flows: enabled}
}

// SeveralFlowsError is what Load returns for a file that enables several flows when MM2_FLOW
// does not choose one. LoadFlows loads them all instead (the run commands do).
type SeveralFlowsError struct {
	File  string
	Flows []string // "A->B", in file order
}

func (e *SeveralFlowsError) Error() string {
	return fmt.Sprintf("%s enables several flows (%s): choose one with MM2_FLOW (run runs them all)", e.File, strings.Join(e.Flows, ", "))
}

// enabledFlows lists "A->B" with A->B.enabled=true; with a clusters list
// only pairs of listed clusters count (as in MirrorMakerConfig).
func (f *mm2File) enabledFlows() []string {
	var flows []string
	for _, k := range f.order {
		pair, ok := strings.CutSuffix(k, ".enabled")
		if !ok || !strings.Contains(pair, "->") {
			continue
		}
		src, tgt, ok := flowFromString(pair)
		if !ok {
			continue
		}
		if f.clusters != nil && (!slices.Contains(f.clusters, src) || !slices.Contains(f.clusters, tgt) || src == tgt) {
			continue
		}
		f.used[k] = true
		if strings.EqualFold(strings.TrimSpace(f.props[k]), "true") {
			flows = append(flows, src+"->"+tgt)
		}
	}
	return flows
}

func (f *mm2File) get(key string) (string, bool) {
	v, ok := f.props[key]
	if ok {
		f.used[key] = true
	}
	return v, ok
}

// first returns the value of the first present key.
func (f *mm2File) first(keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := f.get(k); ok {
			return v, true
		}
	}
	return "", false
}

// isConnKey reports whether key is one MM2 copies from the top level to
// every cluster (bootstrap.servers, security.protocol, ssl.*, sasl.*).
func isConnKey(key string) bool {
	return key == "bootstrap.servers" || key == "security.protocol" ||
		strings.HasPrefix(key, "ssl.") || strings.HasPrefix(key, "sasl.")
}

// lookup returns the file's value for s, following MM2's precedence.
func (f *mm2File) lookup(s *setting) (string, bool) {
	flow := f.source + "->" + f.target + "."
	switch s.scope {
	case "env":
		return "", false
	case "cluster":
		alias := f.source
		if s.role == "target" {
			alias = f.target
		}
		keys := []string{alias + "." + s.prop}
		// A connector-level consumer/admin override applies to the
		// source cluster's clients, below the cluster-level one.
		if s.role == "source" && (strings.HasPrefix(s.prop, "consumer.") || strings.HasPrefix(s.prop, "admin.")) {
			keys = append(keys, flow+s.prop)
		}
		// The target's producer writes the copied records: MM2's Connect
		// worker producer, which a flow overrides per connector with
		// producer.override.<key> (a connector override beats the worker's
		// config in Connect).
		if rest, ok := strings.CutPrefix(s.prop, "producer."); ok && s.role == "target" {
			keys = append([]string{flow + "producer.override." + rest}, keys...)
		}
		if isConnKey(s.prop) {
			keys = append(keys, s.prop)
		}
		return f.first(keys...)
	case "worker":
		return f.first(s.prop, f.target+"."+s.prop)
	case "special":
		switch s.env {
		case "MM2_SOURCE_ALIAS":
			return f.source, true
		case "MM2_TARGET_ALIAS":
			return f.target, true
		case "MM2_REVERSE_HEARTBEATS_ENABLED":
			return f.first(f.target+"->"+f.source+".emit.heartbeats.enabled", "emit.heartbeats.enabled")
		case "MM2_EXACTLY_ONCE":
			if v, ok := f.first(flow+s.prop, s.prop); ok {
				return v, true
			}
			if v, ok := f.get("exactly.once.source.support"); ok {
				return fmt.Sprint(strings.EqualFold(strings.TrimSpace(v), "enabled")), true
			}
			return "", false
		}
		return "", false
	}
	keys := []string{flow + s.prop, s.prop}
	if old, ok := legacyKeys[s.prop]; ok {
		keys = append(keys, flow+old, old)
	}
	return f.first(keys...)
}

// unused lists the file's keys no setting read, in file order.
func (f *mm2File) unused() []string {
	var out []string
	for _, k := range f.order {
		if !f.used[k] {
			out = append(out, k)
		}
	}
	return out
}

// mirrorConnectors are the connector classes whose configs describe a flow.
var mirrorConnectors = []string{"MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"}

// fromConnectorStyle rewrites a connector config (the keys one MM2 connector gets in a Kafka
// Connect cluster, as Kafka Connect, MSK Connect and Strimzi write them:
// source.cluster.alias, source.cluster.bootstrap.servers, target.cluster.*, source.consumer.*,
// producer.override.*, topics, ...) into the dedicated-mode layout the rest of the loader
// reads: clusters=S,T, S->T.enabled=true, S.<key>, T.<key>. A file with clusters or a flow key
// is left alone.
func (f *mm2File) fromConnectorStyle() error {
	connector := false
	for _, k := range f.order {
		if k == "clusters" || strings.Contains(k, "->") {
			return nil
		}
		if strings.HasPrefix(k, "source.cluster.") || strings.HasPrefix(k, "target.cluster.") || k == "connector.class" {
			connector = true
		}
	}
	if !connector {
		return nil
	}
	if class := strings.TrimSpace(f.props["connector.class"]); class != "" && !slices.Contains(mirrorConnectors, class[strings.LastIndex(class, ".")+1:]) {
		return fmt.Errorf("connector.class %q is not a MirrorMaker 2 connector (want org.apache.kafka.connect.mirror.MirrorSourceConnector, MirrorCheckpointConnector or MirrorHeartbeatConnector)", class)
	}
	src := strings.TrimSpace(f.props["source.cluster.alias"])
	tgt := strings.TrimSpace(f.props["target.cluster.alias"])
	if tgt == "" {
		tgt = "target" // MirrorConnectorConfig's default
	}
	switch {
	case src == "":
		return errors.New("connector-style config (source.cluster.*/target.cluster.* keys) without source.cluster.alias: set source.cluster.alias=<alias> (MM2's connectors require it), or write a dedicated-mode file: clusters=A,B, A.bootstrap.servers=..., B.bootstrap.servers=..., A->B.enabled=true")
	case src == tgt:
		return fmt.Errorf("source.cluster.alias and target.cluster.alias are both %q", src)
	case strings.TrimSpace(f.props["source.cluster.bootstrap.servers"]) == "" || strings.TrimSpace(f.props["target.cluster.bootstrap.servers"]) == "":
		return errors.New("connector-style config needs source.cluster.bootstrap.servers and target.cluster.bootstrap.servers (the Connect worker's own cluster is not known here; it must be the target, as MM2 requires)")
	}
	props := map[string]string{"clusters": src + "," + tgt, src + "->" + tgt + ".enabled": "true"}
	order := []string{"clusters", src + "->" + tgt + ".enabled"}
	origin := map[string]string{}
	put := func(k, v, from string) {
		if _, dup := props[k]; !dup {
			order = append(order, k)
		}
		props[k] = v
		origin[k] = from
	}
	for _, k := range f.order {
		v := f.props[k]
		switch {
		case k == "source.cluster.alias" || k == "target.cluster.alias":
			continue
		case strings.HasPrefix(k, "source.cluster."):
			put(src+"."+strings.TrimPrefix(k, "source.cluster."), v, k)
		case strings.HasPrefix(k, "target.cluster."):
			put(tgt+"."+strings.TrimPrefix(k, "target.cluster."), v, k)
		case strings.HasPrefix(k, "source.consumer."), strings.HasPrefix(k, "source.admin."), strings.HasPrefix(k, "source.producer."):
			put(src+"."+strings.TrimPrefix(k, "source."), v, k)
		case strings.HasPrefix(k, "target.consumer."), strings.HasPrefix(k, "target.admin."), strings.HasPrefix(k, "target.producer."):
			put(tgt+"."+strings.TrimPrefix(k, "target."), v, k)
		case strings.HasPrefix(k, "producer.override."):
			// The Connect worker's producer writes the records to the worker's
			// cluster, the target.
			put(tgt+".producer."+strings.TrimPrefix(k, "producer.override."), v, k)
		case strings.HasPrefix(k, "consumer.") || strings.HasPrefix(k, "admin."):
			put(src+"->"+tgt+"."+k, v, k)
		default:
			put(k, v, k)
		}
	}
	f.props, f.order, f.renamed = props, order, origin
	f.used["clusters"], f.used[src+"->"+tgt+".enabled"] = true, true
	return nil
}
