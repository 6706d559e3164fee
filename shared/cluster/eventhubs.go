package cluster

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// EventHubsKafkaPort is the port of the Event Hubs Kafka endpoint.
const EventHubsKafkaPort = "9093"

// EventHubsConnection is a parsed Azure Event Hubs connection string
// (Endpoint=sb://<namespace host>/;SharedAccessKeyName=<rule>;SharedAccessKey=<key>[;EntityPath=<hub>]).
// KeyName and Host are not secret; the key is kept out of the struct on purpose:
// the Kafka endpoint wants the whole string as the SASL PLAIN password.
type EventHubsConnection struct {
	// Host is the namespace host from Endpoint, e.g. "ns.servicebus.windows.net"
	// (any cloud suffix; no port).
	Host string
	// KeyName is the SharedAccessKeyName (the policy name).
	KeyName string
	// EntityPath is the event hub of an entity-level string, or empty for a
	// namespace-level string.
	EntityPath string
}

// Bootstrap returns the Kafka bootstrap address of the namespace, <host>:9093.
func (c EventHubsConnection) Bootstrap() string {
	return net.JoinHostPort(c.Host, EventHubsKafkaPort)
}

// ParseEventHubsConnectionString parses an Event Hubs connection string.
// Keys are case-insensitive, spaces around parts and empty parts (a trailing
// ';') are ignored, and unknown keys are ignored. Errors say which part is
// wrong and never contain the string, the key or any other value from it.
func ParseEventHubsConnectionString(cs string) (EventHubsConnection, error) {
	cs = strings.TrimSpace(cs)
	if cs == "" {
		return EventHubsConnection{}, errors.New("is empty")
	}
	if c := cs[0]; c == '"' || c == '\'' {
		return EventHubsConnection{}, errors.New("starts with a quote character: remove the quotes around the value")
	}
	var (
		conn                    EventHubsConnection
		endpoint, key, sas      string
		haveEndpoint, haveKey   bool
		haveKeyName, haveEntity bool
	)
	for i, part := range strings.Split(cs, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		// Split at the first '=' only: base64 keys end in '=' padding.
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return EventHubsConnection{}, fmt.Errorf("part %d is not key=value", i+1)
		}
		switch strings.ToLower(k) {
		case "endpoint":
			endpoint, haveEndpoint = v, true
		case "sharedaccesskeyname":
			conn.KeyName, haveKeyName = v, true
		case "sharedaccesskey":
			key, haveKey = v, true
		case "entitypath":
			conn.EntityPath, haveEntity = v, true
		case "sharedaccesssignature":
			sas = v
		}
	}
	switch {
	case !haveEndpoint:
		return EventHubsConnection{}, errors.New("has no Endpoint=sb://<namespace host>/ part")
	case sas != "" && !haveKey:
		return EventHubsConnection{}, errors.New("has a SharedAccessSignature token, which the Event Hubs Kafka endpoint does not accept: use a connection string with SharedAccessKeyName and SharedAccessKey")
	case !haveKeyName || conn.KeyName == "":
		return EventHubsConnection{}, errors.New("has no SharedAccessKeyName")
	case !haveKey || key == "":
		return EventHubsConnection{}, errors.New("has no SharedAccessKey")
	case haveEntity && conn.EntityPath == "":
		return EventHubsConnection{}, errors.New("has an empty EntityPath")
	}
	host, err := endpointHost(endpoint)
	if err != nil {
		return EventHubsConnection{}, err
	}
	conn.Host = host
	return conn, nil
}

// endpointHost returns HOST of "sb://HOST/". It does not use url.Parse,
// whose errors quote the input.
func endpointHost(endpoint string) (string, error) {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		return "", errors.New("has an Endpoint that is not a URL: want Endpoint=sb://<namespace host>/")
	}
	if !strings.EqualFold(scheme, "sb") {
		if len(scheme) > 10 || strings.ContainsAny(scheme, "=;/ ") {
			return "", errors.New("has an Endpoint whose scheme is not sb://")
		}
		return "", fmt.Errorf("has an Endpoint with scheme %q: want sb://<namespace host>/", scheme)
	}
	host, _, _ := strings.Cut(rest, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		// An AMQP port (the emulator's sb://localhost:5672) says nothing about Kafka's.
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return "", errors.New("has an Endpoint without a host: want Endpoint=sb://<namespace host>/")
	}
	if strings.ContainsAny(host, "@?#%= \t") {
		return "", errors.New("has an Endpoint whose host is not a plain host name")
	}
	return host, nil
}
