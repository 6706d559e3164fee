package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
)

// Krb5LoginModule is the JAAS login module of Kafka's GSSAPI clients.
const Krb5LoginModule = "com.sun.security.auth.module.Krb5LoginModule"

// DefaultKrb5Conf is where the Kerberos configuration is read from when
// sasl.kerberos.krb5.conf is empty, as MIT Kerberos and Java do.
const DefaultKrb5Conf = "/etc/krb5.conf"

// kerberosLogin is what a GSSAPI client needs: the keytab and principal of
// the JAAS line, the brokers' service name, and krb5.conf.
type kerberosLogin struct {
	keytab, user, realm, service, krb5conf string
}

// parseKerberosLogin reads the GSSAPI settings of s: sasl.jaas.config with
// Krb5LoginModule, useKeyTab=true, keyTab and principal (as Kafka's own
// clients take them), and sasl.kerberos.service.name. Errors name the
// setting; they quote no option value other than the principal and paths.
func parseKerberosLogin(s Settings) (kerberosLogin, error) {
	var l kerberosLogin
	l.service = strings.TrimSpace(s.SASLKerberosServiceName)
	if l.service == "" {
		return l, propErr("sasl.kerberos.service.name", errors.New("required with GSSAPI: the Kerberos service name the brokers run as (the first part of their principal, e.g. kafka)"))
	}
	l.krb5conf = strings.TrimSpace(s.SASLKerberosKrb5Conf)
	if l.krb5conf == "" {
		l.krb5conf = DefaultKrb5Conf
	}
	if !s.SASLJAASConfig.IsSet() {
		return l, propErr("sasl.jaas.config", fmt.Errorf("required with GSSAPI: %s required useKeyTab=true storeKey=true keyTab=\"/path/client.keytab\" principal=\"user@REALM\";", Krb5LoginModule))
	}
	entries, err := parseJAAS(s.SASLJAASConfig.Reveal())
	if err != nil {
		return l, propErr("sasl.jaas.config", err)
	}
	if len(entries) != 1 || entries[0].loginModule != Krb5LoginModule {
		return l, propErr("sasl.jaas.config", fmt.Errorf("GSSAPI needs exactly one %s login module", Krb5LoginModule))
	}
	o := entries[0].options
	if !strings.EqualFold(o["useKeyTab"], "true") || o["keyTab"] == "" {
		return l, propErr("sasl.jaas.config", errors.New("GSSAPI logs in from a keytab only: set useKeyTab=true and keyTab=\"/path/client.keytab\" (a ticket cache, useTicketCache=true, is not supported)"))
	}
	l.keytab = o["keyTab"]
	principal := o["principal"]
	if principal == "" {
		return l, propErr("sasl.jaas.config", errors.New(`GSSAPI needs the principal option, e.g. principal="mm2go@EXAMPLE.COM"`))
	}
	l.user, l.realm, _ = strings.Cut(principal, "@")
	return l, nil
}

// kerberosMechanism returns the GSSAPI mechanism of s: a gokrb5 client that
// logs in from the keytab (on the first connection, and renews its ticket
// itself), with franz-go's Kerberos SASL. The client is shared by every
// connection of the returned mechanism and lives as long as the process.
func kerberosMechanism(s Settings) (sasl.Mechanism, error) {
	l, err := parseKerberosLogin(s)
	if err != nil {
		return nil, err
	}
	cfgText, err := os.ReadFile(l.krb5conf)
	if err != nil {
		return nil, propErr("sasl.kerberos.krb5.conf", err)
	}
	cfg, err := krbconfig.NewFromString(string(cfgText))
	if err != nil {
		return nil, propErr("sasl.kerberos.krb5.conf", fmt.Errorf("%s: %w", l.krb5conf, err))
	}
	if l.realm == "" {
		l.realm = cfg.LibDefaults.DefaultRealm
	}
	if l.realm == "" {
		return nil, propErr("sasl.jaas.config", fmt.Errorf("the principal %q has no realm and %s sets no default_realm", l.user, l.krb5conf))
	}
	kt, err := keytab.Load(l.keytab)
	if err != nil {
		return nil, propErr("sasl.jaas.config", fmt.Errorf("reading the keyTab %s: %w", l.keytab, err))
	}
	// PA-FX-FAST is off as in Java's Krb5LoginModule, which does not use FAST.
	cl := client.NewWithKeytab(l.user, l.realm, kt, cfg, client.DisablePAFXFAST(true))
	return kerberos.Auth{Client: cl, Service: l.service}.AsMechanism(), nil
}
