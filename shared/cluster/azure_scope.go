package cluster

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// AzureScope returns the token scope for a cluster: scope if set (with
// "/.default" appended when missing), else https://<host>/.default for the
// host of the first bootstrap server. Event Hubs' Kafka endpoint wants the
// namespace URI as audience; a token for https://eventhubs.azure.net is
// refused there.
func AzureScope(scope string, bootstrap []string) (string, error) {
	if scope != "" {
		if !strings.HasSuffix(scope, "/.default") {
			scope = strings.TrimSuffix(scope, "/") + "/.default"
		}
		return scope, nil
	}
	if len(bootstrap) == 0 {
		return "", errors.New("no bootstrap server to derive the Azure AD token scope from")
	}
	host, _, err := net.SplitHostPort(bootstrap[0])
	if err != nil {
		host = bootstrap[0]
	}
	if host == "" || net.ParseIP(host) != nil {
		return "", fmt.Errorf("cannot derive the Azure AD token scope from bootstrap server %q: use the namespace host name (<namespace>.servicebus.windows.net:9093) or set azure.scope", bootstrap[0])
	}
	return "https://" + strings.ToLower(host) + "/.default", nil
}
