// Package armeval evaluates the subset of Azure Resource Manager template expressions that
// mm2go's templates use, so tests can turn a template plus a parameters file into the JSON
// that ARM would send to the resource providers and decode it into the Azure SDK's models.
//
// Supported: string literals ('it”s'), integers, true/false via functions, property access
// (.name) and indexes ([0], ['key']), and the functions parameters, variables, format, concat,
// resourceId, subscriptionResourceId, resourceGroup, subscription, environment, reference,
// guid, split, if, and, or, empty, equals, not, createArray, createObject, string and toLower.
// Anything else is an error, so a template that starts using more fails its test instead of
// being half-checked. README.md lists what is left out and where the semantics differ.
package armeval

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Context is what a deployment supplies.
type Context struct {
	SubscriptionID string
	ResourceGroup  string
	Location       string
	// References are the runtime properties reference() returns, by full resource ID (what
	// ARM would read from the deployed resource, e.g. an identity's clientId and principalId).
	// A reference() to an ID not listed is an error.
	References map[string]map[string]any
}

// Template is an ARM deployment template, partly evaluated.
type Template struct {
	ctx        Context
	params     map[string]any // declared parameters: name -> definition
	values     map[string]any // effective parameter values
	rawVars    map[string]any
	vars       map[string]any
	evaluating map[string]bool

	// UsedParameters and UsedVariables record every name an evaluation referred to.
	UsedParameters map[string]bool
	UsedVariables  map[string]bool
}

// New prepares a template for evaluation with the given parameter values (the "parameters"
// object of a parameters file: name -> {"value": ...}). Parameters without a value take their
// defaultValue; a parameter with neither is an error, as is a value for an undeclared parameter
// or a value outside allowedValues.
func New(template map[string]any, paramFile map[string]any, ctx Context) (*Template, error) {
	t := &Template{
		ctx: ctx, values: map[string]any{}, vars: map[string]any{}, evaluating: map[string]bool{},
		UsedParameters: map[string]bool{}, UsedVariables: map[string]bool{},
	}
	var ok bool
	if t.params, ok = template["parameters"].(map[string]any); !ok && template["parameters"] != nil {
		return nil, fmt.Errorf("template parameters is %T, want an object", template["parameters"])
	}
	if t.rawVars, ok = template["variables"].(map[string]any); !ok && template["variables"] != nil {
		return nil, fmt.Errorf("template variables is %T, want an object", template["variables"])
	}
	for name, pv := range paramFile {
		if _, declared := t.params[name]; !declared {
			return nil, fmt.Errorf("parameters file sets %q, which the template does not declare", name)
		}
		m, ok := pv.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("parameter %q: want {\"value\": ...}", name)
		}
		v, ok := m["value"]
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("parameter %q: want exactly {\"value\": ...} (Key Vault references are not used here)", name)
		}
		t.values[name] = v
	}
	names := make([]string, 0, len(t.params))
	for n := range t.params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		def, ok := t.params[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("parameter %q: definition is %T", name, t.params[name])
		}
		typ, _ := def["type"].(string)
		if _, set := t.values[name]; !set {
			d, has := def["defaultValue"]
			if !has {
				return nil, fmt.Errorf("parameter %q has no value and no defaultValue", name)
			}
			v, err := t.Eval(d)
			if err != nil {
				return nil, fmt.Errorf("default of parameter %q: %w", name, err)
			}
			t.values[name] = v
		}
		if err := checkType(name, typ, def, t.values[name]); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func checkType(name, typ string, def map[string]any, v any) error {
	switch strings.ToLower(typ) {
	case "string", "securestring":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("parameter %q is %T, declared %s", name, v, typ)
		}
	case "int":
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) {
			return fmt.Errorf("parameter %q is %v (%T), declared int", name, v, v)
		}
		if mn, ok := def["minValue"].(float64); ok && f < mn {
			return fmt.Errorf("parameter %q = %v below minValue %v", name, f, mn)
		}
		if mx, ok := def["maxValue"].(float64); ok && f > mx {
			return fmt.Errorf("parameter %q = %v above maxValue %v", name, f, mx)
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("parameter %q is %T, declared bool", name, v)
		}
	case "array":
		if _, ok := v.([]any); !ok {
			return fmt.Errorf("parameter %q is %T, declared array", name, v)
		}
	case "object", "secureobject":
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("parameter %q is %T, declared object", name, v)
		}
	default:
		return fmt.Errorf("parameter %q has unknown type %q", name, typ)
	}
	if allowed, ok := def["allowedValues"].([]any); ok {
		for _, a := range allowed {
			if a == v {
				return nil
			}
		}
		return fmt.Errorf("parameter %q = %v is not one of allowedValues %v", name, v, allowed)
	}
	return nil
}

// Parameter returns a parameter's effective value.
func (t *Template) Parameter(name string) (any, bool) {
	v, ok := t.values[name]
	return v, ok
}

// Eval evaluates every expression in v (strings "[...]", in object keys too) recursively.
// A string starting with "[[" is the escaped literal without its first bracket.
func (t *Template) Eval(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "[[") {
			return x[1:], nil
		}
		if strings.HasPrefix(x, "[") && strings.HasSuffix(x, "]") {
			return t.expr(x[1 : len(x)-1])
		}
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := t.Eval(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			kk, err := t.Eval(k)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k, err)
			}
			ks, ok := kk.(string)
			if !ok {
				return nil, fmt.Errorf("key %q evaluates to %T", k, kk)
			}
			r, err := t.Eval(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[ks] = r
		}
		return out, nil
	}
	return v, nil
}

func (t *Template) variable(name string) (any, error) {
	t.UsedVariables[name] = true
	if v, ok := t.vars[name]; ok {
		return v, nil
	}
	raw, ok := t.rawVars[name]
	if !ok {
		return nil, fmt.Errorf("variables(%q): not declared", name)
	}
	if t.evaluating[name] {
		return nil, fmt.Errorf("variables(%q): refers to itself", name)
	}
	t.evaluating[name] = true
	defer delete(t.evaluating, name)
	v, err := t.Eval(raw)
	if err != nil {
		return nil, fmt.Errorf("variables(%q): %w", name, err)
	}
	t.vars[name] = v
	return v, nil
}

// expression parser

type parser struct {
	s   string
	pos int
	t   *Template
}

func (t *Template) expr(s string) (any, error) {
	p := &parser{s: s, t: t}
	v, err := p.value()
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", s, err)
	}
	p.space()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("expression %q: unexpected %q at %d", s, p.s[p.pos:], p.pos)
	}
	return v, nil
}

func (p *parser) space() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *parser) value() (any, error) {
	p.space()
	if p.pos >= len(p.s) {
		return nil, fmt.Errorf("unexpected end")
	}
	var v any
	var err error
	c := p.s[p.pos]
	switch {
	case c == '\'':
		v, err = p.str()
	case c == '-' || unicode.IsDigit(rune(c)):
		v, err = p.num()
	case unicode.IsLetter(rune(c)):
		v, err = p.call()
	default:
		return nil, fmt.Errorf("unexpected %q at %d", c, p.pos)
	}
	if err != nil {
		return nil, err
	}
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case '.':
			p.pos++
			start := p.pos
			for p.pos < len(p.s) && (unicode.IsLetter(rune(p.s[p.pos])) || unicode.IsDigit(rune(p.s[p.pos])) || p.s[p.pos] == '_') {
				p.pos++
			}
			if v, err = member(v, p.s[start:p.pos]); err != nil {
				return nil, err
			}
		case '[':
			p.pos++
			idx, err := p.value()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.pos >= len(p.s) || p.s[p.pos] != ']' {
				return nil, fmt.Errorf("missing ] at %d", p.pos)
			}
			p.pos++
			switch i := idx.(type) {
			case string:
				v, err = member(v, i)
			case float64:
				a, ok := v.([]any)
				if !ok || int(i) < 0 || int(i) >= len(a) {
					return nil, fmt.Errorf("index %v out of range", i)
				}
				v = a[int(i)]
			default:
				return nil, fmt.Errorf("bad index %v", idx)
			}
			if err != nil {
				return nil, err
			}
		default:
			return v, nil
		}
	}
	return v, nil
}

func member(v any, name string) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(".%s on %T", name, v)
	}
	r, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("no property %q", name)
	}
	return r, nil
}

func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		if c == '\'' {
			if p.pos < len(p.s) && p.s[p.pos] == '\'' {
				b.WriteByte('\'')
				p.pos++
				continue
			}
			return b.String(), nil
		}
		b.WriteByte(c)
	}
	return "", fmt.Errorf("unterminated string")
}

func (p *parser) num() (float64, error) {
	start := p.pos
	if p.s[p.pos] == '-' {
		p.pos++
	}
	for p.pos < len(p.s) && unicode.IsDigit(rune(p.s[p.pos])) {
		p.pos++
	}
	n, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
	return float64(n), err
}

func (p *parser) call() (any, error) {
	start := p.pos
	for p.pos < len(p.s) && (unicode.IsLetter(rune(p.s[p.pos])) || unicode.IsDigit(rune(p.s[p.pos]))) {
		p.pos++
	}
	name := p.s[start:p.pos]
	p.space()
	if p.pos >= len(p.s) || p.s[p.pos] != '(' {
		return nil, fmt.Errorf("%s: missing (", name)
	}
	p.pos++
	var args []any
	p.space()
	if p.pos < len(p.s) && p.s[p.pos] == ')' {
		p.pos++
	} else {
		for {
			v, err := p.value()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			args = append(args, v)
			p.space()
			if p.pos >= len(p.s) {
				return nil, fmt.Errorf("%s: missing )", name)
			}
			if p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.s[p.pos] == ')' {
				p.pos++
				break
			}
			return nil, fmt.Errorf("%s: unexpected %q", name, p.s[p.pos])
		}
	}
	return p.t.call(name, args)
}

func (t *Template) call(name string, args []any) (any, error) {
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d arguments, got %d", name, n, len(args))
		}
		return nil
	}
	str := func(i int) (string, error) {
		s, ok := args[i].(string)
		if !ok {
			return "", fmt.Errorf("%s: argument %d is %T, want string", name, i+1, args[i])
		}
		return s, nil
	}
	switch strings.ToLower(name) {
	case "parameters":
		if err := want(1); err != nil {
			return nil, err
		}
		n, err := str(0)
		if err != nil {
			return nil, err
		}
		t.UsedParameters[n] = true
		v, ok := t.values[n]
		if !ok {
			if _, declared := t.params[n]; declared {
				return nil, fmt.Errorf("parameters(%q) used before it has a value", n)
			}
			return nil, fmt.Errorf("parameters(%q): not declared", n)
		}
		return v, nil
	case "variables":
		if err := want(1); err != nil {
			return nil, err
		}
		n, err := str(0)
		if err != nil {
			return nil, err
		}
		return t.variable(n)
	case "format":
		if len(args) < 1 {
			return nil, fmt.Errorf("format needs a format string")
		}
		f, err := str(0)
		if err != nil {
			return nil, err
		}
		out := f
		for i := 1; i < len(args); i++ {
			out = strings.ReplaceAll(out, "{"+strconv.Itoa(i-1)+"}", toString(args[i]))
		}
		if strings.Contains(out, "{") {
			return nil, fmt.Errorf("format %q: placeholder without argument", f)
		}
		return out, nil
	case "concat":
		if len(args) > 0 {
			if _, isArr := args[0].([]any); isArr {
				var out []any
				for i, a := range args {
					arr, ok := a.([]any)
					if !ok {
						return nil, fmt.Errorf("concat: argument %d is %T, want array", i+1, a)
					}
					out = append(out, arr...)
				}
				return out, nil
			}
		}
		var b strings.Builder
		for _, a := range args {
			b.WriteString(toString(a))
		}
		return b.String(), nil
	case "string":
		if err := want(1); err != nil {
			return nil, err
		}
		return toString(args[0]), nil
	case "tolower":
		if err := want(1); err != nil {
			return nil, err
		}
		s, err := str(0)
		return strings.ToLower(s), err
	case "resourceid":
		if len(args) < 2 {
			return nil, fmt.Errorf("resourceId needs a type and a name")
		}
		typ, err := str(0)
		if err != nil {
			return nil, err
		}
		parts := strings.SplitN(typ, "/", 2)
		if len(parts) != 2 {
			return nil, fmt.Errorf("resourceId: bad type %q", typ)
		}
		id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/%s", t.ctx.SubscriptionID, t.ctx.ResourceGroup, parts[0])
		types := strings.Split(parts[1], "/")
		if len(types) != len(args)-1 {
			return nil, fmt.Errorf("resourceId(%q): %d names for %d type segments", typ, len(args)-1, len(types))
		}
		for i, seg := range types {
			n, err := str(i + 1)
			if err != nil {
				return nil, err
			}
			id += "/" + seg + "/" + n
		}
		return id, nil
	case "resourcegroup":
		if err := want(0); err != nil {
			return nil, err
		}
		return map[string]any{
			"name": t.ctx.ResourceGroup, "location": t.ctx.Location,
			"id": fmt.Sprintf("/subscriptions/%s/resourceGroups/%s", t.ctx.SubscriptionID, t.ctx.ResourceGroup),
		}, nil
	case "subscriptionresourceid":
		if len(args) < 2 {
			return nil, fmt.Errorf("subscriptionResourceId needs a type and a name")
		}
		typ, err := str(0)
		if err != nil {
			return nil, err
		}
		parts := strings.SplitN(typ, "/", 2)
		if len(parts) != 2 || strings.Count(parts[1], "/") != len(args)-2 {
			return nil, fmt.Errorf("subscriptionResourceId(%q): %d names for the type's segments", typ, len(args)-1)
		}
		id := fmt.Sprintf("/subscriptions/%s/providers/%s", t.ctx.SubscriptionID, parts[0])
		for i, seg := range strings.Split(parts[1], "/") {
			n, err := str(i + 1)
			if err != nil {
				return nil, err
			}
			id += "/" + seg + "/" + n
		}
		return id, nil
	case "environment":
		if err := want(0); err != nil {
			return nil, err
		}
		// The public cloud's values (AzureCloud).
		return map[string]any{
			"name": "AzureCloud",
			"suffixes": map[string]any{
				"keyvaultDns": ".vault.azure.net", "acrLoginServer": ".azurecr.io", "storage": "core.windows.net",
			},
		}, nil
	case "reference":
		if len(args) < 1 || len(args) > 3 {
			return nil, fmt.Errorf("reference takes 1 to 3 arguments, got %d", len(args))
		}
		id, err := str(0)
		if err != nil {
			return nil, err
		}
		props, ok := t.ctx.References[id]
		if !ok {
			return nil, fmt.Errorf("reference(%q): no runtime properties given for this resource (Context.References)", id)
		}
		return props, nil
	case "guid":
		if len(args) < 1 {
			return nil, fmt.Errorf("guid needs at least one argument")
		}
		parts := make([]string, len(args))
		for i := range args {
			p, err := str(i)
			if err != nil {
				return nil, err
			}
			parts[i] = p
		}
		// Deterministic like ARM's (same inputs, same GUID), not ARM's exact value.
		h := sha1.Sum([]byte(strings.Join(parts, "-")))
		h[6] = h[6]&0x0f | 0x50
		h[8] = h[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]), nil
	case "split":
		if err := want(2); err != nil {
			return nil, err
		}
		s, err := str(0)
		if err != nil {
			return nil, err
		}
		sep, err := str(1)
		if err != nil {
			return nil, err
		}
		var out []any
		for _, p := range strings.Split(s, sep) {
			out = append(out, p)
		}
		return out, nil
	case "and", "or":
		if len(args) < 2 {
			return nil, fmt.Errorf("%s needs at least two arguments", name)
		}
		acc := strings.ToLower(name) == "and"
		for i, a := range args {
			b, ok := a.(bool)
			if !ok {
				return nil, fmt.Errorf("%s: argument %d is %T, want bool", name, i+1, a)
			}
			if strings.ToLower(name) == "and" {
				acc = acc && b
			} else {
				acc = acc || b
			}
		}
		return acc, nil
	case "subscription":
		if err := want(0); err != nil {
			return nil, err
		}
		return map[string]any{"subscriptionId": t.ctx.SubscriptionID, "id": "/subscriptions/" + t.ctx.SubscriptionID}, nil
	case "if":
		if err := want(3); err != nil {
			return nil, err
		}
		c, ok := args[0].(bool)
		if !ok {
			return nil, fmt.Errorf("if: condition is %T", args[0])
		}
		if c {
			return args[1], nil
		}
		return args[2], nil
	case "empty":
		if err := want(1); err != nil {
			return nil, err
		}
		switch x := args[0].(type) {
		case nil:
			return true, nil
		case string:
			return x == "", nil
		case []any:
			return len(x) == 0, nil
		case map[string]any:
			return len(x) == 0, nil
		}
		return nil, fmt.Errorf("empty: %T", args[0])
	case "equals":
		if err := want(2); err != nil {
			return nil, err
		}
		a, _ := json.Marshal(args[0])
		b, _ := json.Marshal(args[1])
		return string(a) == string(b), nil
	case "not":
		if err := want(1); err != nil {
			return nil, err
		}
		b, ok := args[0].(bool)
		if !ok {
			return nil, fmt.Errorf("not: %T", args[0])
		}
		return !b, nil
	case "true":
		return true, want(0)
	case "false":
		return false, want(0)
	case "createarray":
		return append([]any{}, args...), nil
	case "createobject":
		if len(args)%2 != 0 {
			return nil, fmt.Errorf("createObject needs key/value pairs")
		}
		m := map[string]any{}
		for i := 0; i < len(args); i += 2 {
			k, err := str(i)
			if err != nil {
				return nil, err
			}
			m[k] = args[i+1]
		}
		return m, nil
	}
	return nil, fmt.Errorf("function %s is not supported by armeval", name)
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
