package config

import (
	"testing"
)

// The TLS store and GSSAPI keys of an MM2 file, and their environment
// variables, reach cluster.Settings (the file's values, the environment
// winning where both are set).
func TestSecurityKeysReachSettings(t *testing.T) {
	path, _ := file(t, `clusters=a,b
a->b.enabled=true
a.bootstrap.servers=a:1
b.bootstrap.servers=b:1
a.security.protocol=SASL_SSL
a.sasl.mechanism=GSSAPI
a.sasl.kerberos.service.name=kafka
a.sasl.kerberos.krb5.conf=/etc/krb5-a.conf
a.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/k/mm2.keytab" principal="mm2@EXAMPLE.COM";
a.ssl.truststore.location=/s/trust.jks
a.ssl.truststore.type=JKS
a.ssl.truststore.password=file-trust-pw
b.security.protocol=SSL
b.ssl.keystore.location=/s/client.p12
b.ssl.keystore.type=PKCS12
b.ssl.keystore.password=file-key-pw
b.ssl.key.password=file-k-pw
`)
	c := mustLoad(t, map[string]string{"MM2_CONFIG_FILE": path, "MM2_TARGET_SSL_KEYSTORE_PASSWORD": "env-key-pw"})
	s, tg := c.Source, c.Target
	if s.SASLMechanism != "GSSAPI" || s.SASLKerberosServiceName != "kafka" || s.SASLKerberosKrb5Conf != "/etc/krb5-a.conf" {
		t.Errorf("source GSSAPI settings: %q %q %q", s.SASLMechanism, s.SASLKerberosServiceName, s.SASLKerberosKrb5Conf)
	}
	if s.SSLTruststoreLocation != "/s/trust.jks" || s.SSLTruststoreType != "JKS" || s.SSLTruststorePassword.Reveal() != "file-trust-pw" {
		t.Errorf("source truststore: %q %q", s.SSLTruststoreLocation, s.SSLTruststoreType)
	}
	if tg.SSLKeystoreLocation != "/s/client.p12" || tg.SSLKeystoreType != "PKCS12" || tg.SSLKeystorePassword.Reveal() != "env-key-pw" || tg.SSLKeyPassword.Reveal() != "file-k-pw" {
		t.Errorf("target keystore: %q %q", tg.SSLKeystoreLocation, tg.SSLKeystoreType)
	}
}
