package config

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// providerRef is Kafka ConfigTransformer's pattern: ${provider:path:key} or
// ${provider:key}; lazy, no '}' inside.
var providerRef = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// Provider classes accepted in config.providers.<name>.class.
const (
	fileProviderClass = "org.apache.kafka.common.config.provider.FileConfigProvider"
	envProviderClass  = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
	dirProviderClass  = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
)

type providerKind int

const (
	providerFile providerKind = iota + 1
	providerEnv
	providerDir
)

type provider struct {
	kind         providerKind
	allowedPaths []string       // file, dir: allowed.paths param (nil: any)
	allowlist    *regexp.Regexp // env: allowlist.pattern param (nil: any)
}

// providers holds the config providers of one properties file and caches
// what they read.
// EnvAutomaticConfigProviders is the process-level switch of Kafka's system property
// org.apache.kafka.automatic.config.providers: unset, every provider a properties file declares
// is available; set, only the provider classes it lists (comma separated; "none" lists none).
const EnvAutomaticConfigProviders = "MM2_AUTOMATIC_CONFIG_PROVIDERS"

type providers struct {
	byName    map[string]*provider
	lookupEnv func(string) (string, bool)
	files     map[string]map[string]string // FileConfigProvider: path -> properties
	logger    *slog.Logger
	resolved  []resolvedRef // every value a reference resolved to, for errors (redactResolved)
}

// resolvedRef is a reference and the value it resolved to.
type resolvedRef struct{ ref, value string }

// newProviders builds the providers declared in props (config.providers and
// config.providers.<name>.class / .param.<k>), marking those keys used.
//
// A file that declares config.providers gets exactly what it declares, as in
// Kafka. Kafka resolves no reference at all without that line; mm2go keeps
// one restricted provider then, "file", because files like the one in our
// users' README (source.bootstrap.servers=${file:/properties/access.properties:SRC_BROKERS}
// without a config.providers line) worked in their Docker image, which set
// the providers up. "env" (every variable of the process, credentials
// included) and "dir" must be declared. Every file provider reads absolute
// paths only, files of at most maxProviderFileBytes.
//
// MM2_AUTOMATIC_CONFIG_PROVIDERS, when set, lists the provider classes allowed, as Kafka's
// system property does: a declared provider of another class is an error, and the undeclared
// "file" provider exists only if FileConfigProvider is listed.
func newProviders(props map[string]string, used map[string]bool, lookupEnv func(string) (string, bool), logger *slog.Logger) (*providers, error) {
	p := &providers{byName: map[string]*provider{}, lookupEnv: lookupEnv, files: map[string]map[string]string{}, logger: logger}
	allowed := automaticProviders(lookupEnv)
	names, declared := props["config.providers"]
	if !declared {
		if allowed == nil || allowed[providerFile] {
			p.byName["file"] = &provider{kind: providerFile}
		}
		return p, nil
	}
	used["config.providers"] = true
	for _, name := range strings.Split(names, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		prefix := "config.providers." + name + "."
		class := strings.TrimSpace(props[prefix+"class"])
		kind := providerKindOf(class)
		if allowed != nil && !allowed[kind] {
			return nil, fmt.Errorf("%sclass: %s is not allowed: %s lists the provider classes allowed (%q)", prefix, class, EnvAutomaticConfigProviders, allowedList(lookupEnv))
		}
		if kind == 0 {
			logger.Warn("config provider not supported; its ${...} references stay unresolved", "provider", name, "class", class)
			continue
		}
		pr := &provider{kind: kind}
		if v, ok := props[prefix+"param.allowed.paths"]; ok {
			pr.allowedPaths = []string{} // set: only these (Kafka's AllowedPaths)
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					if !filepath.IsAbs(a) {
						return nil, fmt.Errorf("%sparam.allowed.paths: %q is not an absolute path", prefix, a)
					}
					pr.allowedPaths = append(pr.allowedPaths, filepath.Clean(a))
				}
			}
		}
		if v, ok := props[prefix+"param.allowlist.pattern"]; ok {
			re, err := regexp.Compile(`^(?:` + v + `)$`)
			if err != nil {
				return nil, fmt.Errorf("%sparam.allowlist.pattern: %w", prefix, err)
			}
			pr.allowlist = re
		}
		p.byName[name] = pr
	}
	for k := range props {
		if strings.HasPrefix(k, "config.providers.") {
			used[k] = true
		}
	}
	return p, nil
}

// providerKindOf returns the provider a class name (full or simple) names, 0 for another class.
func providerKindOf(class string) providerKind {
	switch class {
	case fileProviderClass, "FileConfigProvider":
		return providerFile
	case envProviderClass, "EnvVarConfigProvider":
		return providerEnv
	case dirProviderClass, "DirectoryConfigProvider":
		return providerDir
	}
	return 0
}

// automaticProviders returns the providers MM2_AUTOMATIC_CONFIG_PROVIDERS allows, nil when it
// is unset (all of them). Entries naming no supported class ("none") allow nothing.
func automaticProviders(lookupEnv func(string) (string, bool)) map[providerKind]bool {
	v, set := lookupEnv(EnvAutomaticConfigProviders)
	if !set {
		return nil
	}
	allowed := map[providerKind]bool{}
	for _, c := range strings.Split(v, ",") {
		if k := providerKindOf(strings.TrimSpace(c)); k != 0 {
			allowed[k] = true
		}
	}
	return allowed
}

func allowedList(lookupEnv func(string) (string, bool)) string {
	v, _ := lookupEnv(EnvAutomaticConfigProviders)
	return v
}

// resolve replaces every ${provider:[path:]key} in v whose provider and key
// are known; other references stay as they are (as in Kafka).
func (p *providers) resolve(v string) (string, error) {
	var firstErr error
	out := providerRef.ReplaceAllStringFunc(v, func(ref string) string {
		m := providerRef.FindStringSubmatch(ref)
		name, hasPath, path, key := m[1], m[2] != "", m[3], m[4]
		pr := p.byName[name]
		if pr == nil {
			return ref
		}
		val, ok, err := p.get(pr, hasPath, path, key)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("config provider %q: %w", name, err)
		}
		if !ok {
			p.logger.Debug("config provider reference left unresolved", "reference", ref)
			return ref
		}
		if strings.TrimSpace(val) != "" {
			p.resolved = append(p.resolved, resolvedRef{ref: ref, value: val})
		}
		return val
	})
	return out, firstErr
}

// pathAllowed reports whether a provider may read path: an absolute path,
// inside one of allowed.paths when that is set (component by component, as
// Java's Path.startsWith in Kafka's AllowedPaths: "/" allows every path).
func (pr *provider) pathAllowed(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	if pr.allowedPaths == nil {
		return true
	}
	path = filepath.Clean(path)
	for _, a := range pr.allowedPaths {
		if path == a || strings.HasPrefix(path, strings.TrimSuffix(a, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// maxProviderFileBytes bounds a file a provider reads: properties and secrets, not data.
const maxProviderFileBytes = 1 << 20

// readLimited reads a provider's file, refusing one over maxProviderFileBytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxProviderFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxProviderFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxProviderFileBytes)
	}
	return data, nil
}

func (p *providers) get(pr *provider, hasPath bool, path, key string) (string, bool, error) {
	switch pr.kind {
	case providerEnv:
		// EnvVarConfigProvider: no path allowed; variables outside the
		// allowlist are invisible.
		if hasPath && path != "" {
			return "", false, nil
		}
		if pr.allowlist != nil && !pr.allowlist.MatchString(key) {
			return "", false, nil
		}
		v, ok := p.lookupEnv(key)
		return v, ok, nil
	case providerFile:
		if !hasPath || path == "" || !pr.pathAllowed(path) {
			return "", false, nil
		}
		kv, ok := p.files[path]
		if !ok {
			data, err := readLimited(path)
			if err != nil {
				// Kafka's FileConfigProvider fails here too.
				return "", false, fmt.Errorf("reading properties from %s: %w", path, err)
			}
			props, err := parseProperties(data)
			if err != nil {
				return "", false, fmt.Errorf("parsing %s: %w", path, err)
			}
			kv = map[string]string{}
			for _, pp := range props {
				kv[pp.key] = pp.value
			}
			p.files[path] = kv
		}
		v, ok := kv[key]
		return v, ok, nil
	case providerDir:
		if !hasPath || path == "" || !pr.pathAllowed(path) {
			return "", false, nil
		}
		if key == "" || strings.ContainsAny(key, `/\`) || key == "." || key == ".." {
			return "", false, nil
		}
		st, err := os.Stat(filepath.Join(path, key))
		if err != nil || !st.Mode().IsRegular() {
			return "", false, nil
		}
		data, err := readLimited(filepath.Join(path, key))
		if err != nil {
			return "", false, fmt.Errorf("reading %s: %w", filepath.Join(path, key), err)
		}
		return string(data), true, nil
	}
	return "", false, nil
}

// redactResolved returns err unchanged, or, when its text quotes a value a
// config provider resolved (a credential may have been referenced into a
// setting that is not a secret, e.g. bootstrap.servers=${env:..._PASSWORD}),
// an error whose text names the reference instead of quoting the value;
// Unwrap gives err.
func redactResolved(err error, resolved []resolvedRef) error {
	if err == nil || len(resolved) == 0 {
		return err
	}
	msg := err.Error()
	out := msg
	for _, r := range resolved {
		mark := "[the value of " + r.ref + "]"
		out = strings.ReplaceAll(out, strconv.Quote(r.value), mark)
		out = strings.ReplaceAll(out, strconv.Quote(strings.TrimSpace(r.value)), mark)
		if v := strings.TrimSpace(r.value); len(v) >= 4 {
			out = strings.ReplaceAll(out, v, mark)
		}
	}
	if out == msg {
		return err
	}
	return &redactedError{msg: out, err: err}
}

// redactedError is an error whose text had a resolved value taken out.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
