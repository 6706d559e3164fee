package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mm2go/mm2go/shared/secret"
)

// setting is one leaf field of Config with its names. The env names are
// built like envconfig's gatherInfo for our tags (explicit envconfig names,
// named nested structs prefix their fields); a test checks both agree.
type setting struct {
	env      string
	prop     string // mm2 tag: cluster-relative for cluster fields
	scope    string // "", "worker", "env", "special", "cluster"
	role     string // "source"/"target" for cluster fields
	def      string
	hasDef   bool
	defDoc   string
	notrim   bool
	isSecret bool
	// fns are the functions that read it (the fn tag, or its struct's); empty: every one.
	fns []string
	// cmds are the sub-commands that read it (the cmd tag); empty: every one.
	cmds  []string
	path  string // Go field path in Config, e.g. SourceConsumer.FetchMaxBytes
	field reflect.Value
}

// readBy reports whether function reads s ("" or an unknown name: every setting is listed).
func (s *setting) readBy(function string) bool {
	if function == "" || len(s.fns) == 0 {
		return true
	}
	for _, f := range s.fns {
		if f == function {
			return true
		}
	}
	return false
}

// readByCommand reports whether the sub-command cmd ("run", "serve", "status", ...) reads s
// ("": every setting is listed).
func (s *setting) readByCommand(cmd string) bool {
	return cmd == "" || len(s.cmds) == 0 || slices.Contains(s.cmds, cmd)
}

var (
	secretType   = reflect.TypeOf(secret.Secret{})
	durationType = reflect.TypeOf(time.Duration(0))
)

func settingsOf(c *Config) []setting {
	return walk(reflect.ValueOf(c).Elem(), "", "", "", nil)
}

// SettingField is one setting as Go code reads it: its variable, its field path in Config
// (Source.SASLMechanism, SourceConsumer.FetchMaxBytes) and the functions that read it (nil:
// every function). test/doccheck checks the functions against the code that reads the field.
type SettingField struct {
	Env, Field string
	Functions  []string
}

// SettingFields lists every setting, in Usage's order.
func SettingFields() []SettingField {
	var out []SettingField
	for _, s := range settingsOf(&Config{}) {
		out = append(out, SettingField{Env: s.env, Field: s.path, Functions: s.fns})
	}
	return out
}

// walk lists the leaf fields of struct v. Nested struct fields (other than
// Secret) add their envconfig name to the env prefix, their mm2 tag (if
// any) to the property prefix, and may set the role (cluster fields keep
// their parent's role), so cluster.Settings can grow nested groups such as
// Azure AD settings without changes here.
func walk(v reflect.Value, prefix, propPrefix, role string, fns []string) []setting {
	var out []setting
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("ignored") == "true" {
			continue
		}
		env := f.Tag.Get("envconfig")
		fieldFns := fns
		if t := f.Tag.Get("fn"); t != "" {
			fieldFns = strings.Split(t, ",")
		}
		if prefix != "" {
			env = prefix + "_" + env
		}
		if f.Type.Kind() == reflect.Struct && f.Type != secretType {
			innerRole, innerProp := role, propPrefix
			if r := f.Tag.Get("role"); r != "" {
				innerRole = r
			}
			if p := f.Tag.Get("mm2"); p != "" {
				innerProp += p + "."
			}
			for _, in := range walk(v.Field(i), env, innerProp, innerRole, fieldFns) {
				in.path = f.Name + "." + in.path
				out = append(out, in)
			}
			continue
		}
		s := setting{
			env:      env,
			prop:     propPrefix + f.Tag.Get("mm2"),
			scope:    f.Tag.Get("scope"),
			role:     role,
			defDoc:   f.Tag.Get("defaultdoc"),
			notrim:   f.Tag.Get("notrim") == "true",
			isSecret: f.Type == secretType,
			fns:      fieldFns,
			cmds:     tagList(f.Tag.Get("cmd")),
			path:     f.Name,
			field:    v.Field(i),
		}
		s.def, s.hasDef = f.Tag.Lookup("default")
		if role != "" {
			s.scope = "cluster"
		}
		out = append(out, s)
	}
	return out
}

// tagList splits a comma-separated tag value; "" is none.
func tagList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// property is the MM2 property name shown in errors and usage.
func (s *setting) property(c *Config) string {
	switch {
	case s.scope == "cluster":
		alias := c.SourceAlias
		if s.role == "target" {
			alias = c.TargetAlias
		}
		return alias + "." + s.prop
	case s.env == "MM2_REVERSE_HEARTBEATS_ENABLED":
		return c.TargetAlias + "->" + c.SourceAlias + ".emit.heartbeats.enabled"
	}
	return s.prop
}

// set decodes raw into the field.
func (s *setting) set(raw string) error {
	f := s.field
	if f.Type() == secretType {
		f.Set(reflect.ValueOf(secret.New(raw)))
		return nil
	}
	if !s.notrim {
		raw = strings.TrimSpace(raw)
	}
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 90s, 5m)", raw)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(raw)
	case f.Kind() == reflect.Bool:
		switch strings.ToLower(raw) {
		case "true", "1", "t", "yes":
			f.SetBool(true)
		case "false", "0", "f", "no":
			f.SetBool(false)
		default:
			return fmt.Errorf("%q is not true or false", raw)
		}
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not an integer", raw)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, it := range strings.Split(raw, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		f.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}
