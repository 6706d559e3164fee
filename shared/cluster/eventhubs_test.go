package cluster

import (
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/secret"
)

const testSASKey = "c2VjcmV0LWtleS1kby1ub3QtbG9nIQ=="

func TestParseEventHubsConnectionString(t *testing.T) {
	for _, test := range []struct {
		name    string
		in      string
		want    EventHubsConnection
		errPart string
	}{
		{
			name: "namespace",
			in:   "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + testSASKey,
			want: EventHubsConnection{Host: "ns1.servicebus.windows.net", KeyName: "RootManageSharedAccessKey"},
		},
		{
			name: "entity path",
			in:   "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=" + testSASKey + ";EntityPath=orders",
			want: EventHubsConnection{Host: "ns1.servicebus.windows.net", KeyName: "send", EntityPath: "orders"},
		},
		{
			name: "china cloud, no trailing slash",
			in:   "Endpoint=sb://ns.servicebus.chinacloudapi.cn;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey,
			want: EventHubsConnection{Host: "ns.servicebus.chinacloudapi.cn", KeyName: "k"},
		},
		{
			name: "us gov, custom order and case",
			in:   "sharedaccesskey=" + testSASKey + ";ENDPOINT=SB://ns.servicebus.usgovcloudapi.net/;SharedAccessKeyName=k",
			want: EventHubsConnection{Host: "ns.servicebus.usgovcloudapi.net", KeyName: "k"},
		},
		{
			name: "spaces, trailing semicolons, newline",
			in:   "  Endpoint = sb://kafka.example.internal/ ; SharedAccessKeyName = k ;SharedAccessKey=" + testSASKey + ";;\n",
			want: EventHubsConnection{Host: "kafka.example.internal", KeyName: "k"},
		},
		{
			name: "emulator style port is dropped",
			in:   "Endpoint=sb://localhost:5672/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey + ";UseDevelopmentEmulator=true",
			want: EventHubsConnection{Host: "localhost", KeyName: "k"},
		},
		{name: "empty", in: "  ", errPart: "is empty"},
		{name: "missing endpoint", in: "SharedAccessKeyName=k;SharedAccessKey=" + testSASKey, errPart: "has no Endpoint"},
		{name: "missing key", in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k", errPart: "has no SharedAccessKey"},
		{name: "empty key", in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=", errPart: "has no SharedAccessKey"},
		{name: "missing key name", in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=" + testSASKey, errPart: "has no SharedAccessKeyName"},
		{name: "wrong scheme", in: "Endpoint=https://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey, errPart: `scheme "https"`},
		{name: "not a url", in: "Endpoint=ns.servicebus.windows.net;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey, errPart: "not a URL"},
		{name: "no host", in: "Endpoint=sb:///;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey, errPart: "without a host"},
		{name: "quoted", in: `"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=` + testSASKey + `"`, errPart: "quote"},
		{name: "part without =", in: "Endpoint=sb://ns.servicebus.windows.net/;justtext;SharedAccessKeyName=k", errPart: "part 2 is not key=value"},
		{name: "sas token", in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=x&sig=" + testSASKey, errPart: "SharedAccessSignature"},
		{name: "empty entity path", in: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + testSASKey + ";EntityPath=", errPart: "empty EntityPath"},
	} {
		t.Run(test.name, func(t *testing.T) {
			got, err := ParseEventHubsConnectionString(test.in)
			if test.errPart != "" {
				if err == nil {
					t.Fatalf("no error, got %+v", got)
				}
				if !strings.Contains(err.Error(), test.errPart) {
					t.Errorf("error %q does not contain %q", err, test.errPart)
				}
				if strings.Contains(err.Error(), testSASKey) || strings.Contains(err.Error(), "servicebus") {
					t.Errorf("error %q contains part of the connection string", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != test.want {
				t.Errorf("got %+v, want %+v", got, test.want)
			}
		})
	}
}

func TestEventHubsBootstrap(t *testing.T) {
	for _, test := range []struct {
		name     string
		explicit []string
		cs       string
		want     string
	}{
		{name: "derived from localhost", cs: "Endpoint=sb://localhost/;SharedAccessKeyName=test;SharedAccessKey=fake-key-do-not-log", want: "localhost:9093"},
		{name: "derived, any suffix", cs: "Endpoint=sb://ns.servicebus.cloudapi.de/;SharedAccessKeyName=k;SharedAccessKey=x", want: "ns.servicebus.cloudapi.de:9093"},
		{name: "explicit wins", explicit: []string{"10.0.0.4:9093"}, cs: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=x", want: "10.0.0.4:9093"},
	} {
		t.Run(test.name, func(t *testing.T) {
			s := Settings{Alias: "target", BootstrapServers: test.explicit, EventHubsConnectionString: secret.New(test.cs)}
			got, err := Bootstrap(s)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != test.want {
				t.Errorf("Bootstrap = %v, want %s", got, test.want)
			}
			// Options derives the same seeds and turns on SASL_SSL/PLAIN.
			n, eh, err := normalized(s)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(n.BootstrapServers, ",") != test.want || eh == nil ||
				n.SecurityProtocol != ProtocolSASLSSL || n.SASLMechanism != MechanismPlain {
				t.Errorf("normalized: seeds %v, protocol %s, mechanism %s", n.BootstrapServers, n.SecurityProtocol, n.SASLMechanism)
			}
			if _, err := Options(s, nil); err != nil {
				t.Errorf("Options: %v", err)
			}
		})
	}
}

func TestEventHubsMalformedErrorNamesVariable(t *testing.T) {
	const key = "TopSecretKeyValue123="
	for _, cs := range []string{
		"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAcessKey=" + key, // typo
		"Endpoint=amqps://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + key,
		"SharedAccessKeyName=k;SharedAccessKey=" + key,
	} {
		s := Settings{Alias: "target", EventHubsConnectionString: secret.New(cs)}
		_, err := Options(s, nil)
		if err == nil {
			t.Fatalf("Options accepted a malformed connection string")
		}
		msg := err.Error()
		if !strings.Contains(msg, "MM2_TARGET_EVENTHUBS_CONNECTION_STRING") || !strings.Contains(msg, "target.eventhubs.connection.string") {
			t.Errorf("error does not name the variable and property: %s", msg)
		}
		if strings.Contains(msg, key) || strings.Contains(msg, cs) || strings.Contains(msg, "servicebus") {
			t.Errorf("error leaks the connection string: %s", msg)
		}
		t.Log(msg)
	}
}
