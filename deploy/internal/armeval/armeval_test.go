package armeval

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEval(t *testing.T) {
	tmpl := mustJSON(t, `{
	  "parameters": {
	    "name": {"type": "string"},
	    "loc": {"type": "string", "defaultValue": "[resourceGroup().location]"},
	    "n": {"type": "int", "defaultValue": 3, "minValue": 1},
	    "reg": {"type": "string", "defaultValue": ""},
	    "mode": {"type": "string", "defaultValue": "a", "allowedValues": ["a", "b"]}
	  },
	  "variables": {
	    "id": "[resourceId('Microsoft.ManagedIdentity/userAssignedIdentities', parameters('name'))]",
	    "list": [{"name": "[format('{0}-{1}', parameters('name'), parameters('n'))]"}],
	    "regs": "[if(empty(parameters('reg')), createArray(), createArray(createObject('server', parameters('reg'))))]"
	  }
	}`)
	tp, err := New(tmpl, map[string]any{"name": map[string]any{"value": "x"}}, Context{SubscriptionID: "s", ResourceGroup: "rg", Location: "westeurope"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]any{
		"[parameters('loc')]":                             "westeurope",
		"[variables('id')]":                               "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/x",
		"[variables('list')[0].name]":                     "x-3",
		"[variables('regs')]":                             []any{},
		"[concat('a', 'b''c', string(1))]":                "ab'c1",
		"[[not an expression]":                            "[not an expression]",
		"[equals(parameters('mode'), 'a')]":               true,
		"[createObject('k', createArray(1, 'two'))['k']]": []any{float64(1), "two"},
	}
	for in, want := range cases {
		got, err := tp.Eval(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", in, got, want)
		}
	}
	got, err := tp.Eval(map[string]any{"[variables('id')]": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.(map[string]any)["/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/x"]; !ok {
		t.Errorf("object key not evaluated: %v", got)
	}
	for _, bad := range []string{"[parameters('nope')]", "[variables('nope')]", "[uniqueString('a')]", "[format('{0}{1}', 'a')]", "[concat('a']"} {
		if _, err := tp.Eval(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if !tp.UsedParameters["name"] || !tp.UsedVariables["list"] {
		t.Errorf("usage not recorded: %v %v", tp.UsedParameters, tp.UsedVariables)
	}
}

func TestNewRejects(t *testing.T) {
	tmpl := mustJSON(t, `{"parameters": {"a": {"type": "string"}, "m": {"type": "string", "defaultValue": "x", "allowedValues": ["x"]}, "i": {"type": "int", "defaultValue": 5, "maxValue": 9}}}`)
	ctx := Context{SubscriptionID: "s", ResourceGroup: "rg", Location: "l"}
	for name, pf := range map[string]map[string]any{
		"missing":    {},
		"undeclared": {"a": map[string]any{"value": "v"}, "zz": map[string]any{"value": "v"}},
		"type":       {"a": map[string]any{"value": 1.0}},
		"allowed":    {"a": map[string]any{"value": "v"}, "m": map[string]any{"value": "y"}},
		"max":        {"a": map[string]any{"value": "v"}, "i": map[string]any{"value": 10.0}},
	} {
		if _, err := New(tmpl, pf, ctx); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "parameter") {
			t.Errorf("%s: unexpected error %v", name, err)
		}
	}
}
