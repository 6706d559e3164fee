package cluster

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/youmark/pkcs8"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/mm2go/mm2go/shared/secret"
)

// Store formats of ssl.truststore.type and ssl.keystore.type.
const (
	StoreJKS    = "JKS"
	StorePKCS12 = "PKCS12"
	StorePEM    = "PEM"
)

// TLSConfig returns the TLS configuration for s (whose protocol is SSL or
// SASL_SSL), as Kafka's default SSL engine builds it:
//
//   - TLS 1.2 or newer;
//   - trust: the certificates of ssl.truststore.location (a JKS, PKCS12 or
//     PEM store, per ssl.truststore.type, with ssl.truststore.password) or of
//     ssl.truststore.certificates (inline PEM). A configured truststore
//     replaces the system roots; the system roots are used only when neither
//     is set;
//   - a client certificate (mutual TLS) from ssl.keystore.location (JKS,
//     PKCS12 or PEM, with ssl.keystore.password) or ssl.keystore.key +
//     ssl.keystore.certificate.chain (inline PEM); ssl.key.password opens an
//     encrypted key (a JKS key entry, or an encrypted PKCS#8 PEM key);
//   - host name verification unless ssl.endpoint.identification.algorithm is
//     empty, in which case the certificate chain is still verified but the
//     name in it is not.
//
// An empty store type is taken from the file's content (JKS magic, PEM
// text, else PKCS12). Errors name the setting at fault and never contain a
// password or key.
//
// franz-go clones the config per connection and sets ServerName to the
// dialed host, so it is left empty here.
func TLSConfig(s Settings) (*tls.Config, error) {
	roots, err := trustedRoots(s)
	if err != nil {
		return nil, err
	}
	// RootCAs nil means the system roots.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}

	cert, ok, err := clientCertificate(s)
	if err != nil {
		return nil, err
	}
	if ok {
		cfg.Certificates = []tls.Certificate{cert}
	}

	switch strings.ToLower(strings.TrimSpace(s.SSLEndpointIdentificationAlgorithm)) {
	case "https":
	case "":
		// Kafka's ssl.endpoint.identification.algorithm= (empty): trust the
		// chain, not the name. Go can only skip both checks, so the chain is
		// verified again by hand below.
		cfg.InsecureSkipVerify = true //nolint:gosec // the chain is verified in VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyChain(cs, roots)
		}
	default:
		return nil, propErr("ssl.endpoint.identification.algorithm", fmt.Errorf("unknown value %q (want https, or empty to disable host name verification)", s.SSLEndpointIdentificationAlgorithm))
	}
	return cfg, nil
}

// verifyChain verifies the peer's certificate chain against roots (nil: the
// system roots) without checking the host name.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("broker sent no TLS certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// storeType returns the format of a store: the configured type (upper-cased),
// or, when it is empty, the one data looks like.
func storeType(configured string, data []byte) string {
	if t := strings.ToUpper(strings.TrimSpace(configured)); t != "" {
		return t
	}
	switch {
	case bytes.HasPrefix(data, []byte{0xfe, 0xed, 0xfe, 0xed}):
		return StoreJKS
	case bytes.Contains(data, []byte("-----BEGIN ")):
		return StorePEM
	}
	return StorePKCS12
}

// trustedRoots returns the configured trust anchors, or nil (the system
// roots) when no truststore is set.
func trustedRoots(s Settings) (*x509.CertPool, error) {
	const loc, pw, typ = "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type"
	var certs []*x509.Certificate
	switch {
	case s.SSLTruststoreLocation != "":
		b, err := os.ReadFile(s.SSLTruststoreLocation)
		if err != nil {
			return nil, propErr(loc, err)
		}
		switch t := storeType(s.SSLTruststoreType, b); t {
		case StorePEM:
			if s.SSLTruststorePassword.IsSet() {
				return nil, propErr(pw, errors.New("must not be set for a PEM truststore (PEM certificates have no password; Kafka refuses it too)"))
			}
			certs, err = pemCertificates(b)
			if err != nil {
				return nil, propErr(loc, err)
			}
		case StoreJKS:
			certs, err = jksTrusted(b, s.SSLTruststorePassword, s.SSLTruststoreLocation, loc, pw)
			if err != nil {
				return nil, err
			}
		case StorePKCS12:
			certs, err = pkcs12.DecodeTrustStore(b, s.SSLTruststorePassword.Reveal())
			if err != nil {
				return nil, pkcs12Err(err, "truststore", s.SSLTruststoreLocation, loc, pw, s.SSLTruststorePassword)
			}
		default:
			return nil, propErr(typ, fmt.Errorf("%q is not supported (want JKS, PKCS12 or PEM)", t))
		}
	case s.SSLTruststoreCertificates != "":
		const inline = "ssl.truststore.certificates"
		if t := strings.ToUpper(strings.TrimSpace(s.SSLTruststoreType)); t != "" && t != StorePEM {
			return nil, propErr(typ, fmt.Errorf("must be PEM (or empty) with %s", inline))
		}
		var err error
		certs, err = pemCertificates([]byte(s.SSLTruststoreCertificates))
		if err != nil {
			return nil, propErr(inline, err)
		}
	default:
		return nil, nil
	}
	if len(certs) == 0 {
		return nil, propErr(loc, errors.New("the truststore holds no trusted certificate"))
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// pemCertificates parses the CERTIFICATE blocks of PEM data; a private key
// block is an error here (a truststore holds no keys).
func pemCertificates(b []byte) ([]*x509.Certificate, error) {
	blocks, keys, err := pemBlocks(b)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		return nil, errors.New("holds a private key: a truststore holds only CA certificates")
	}
	if len(blocks) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	certs := make([]*x509.Certificate, 0, len(blocks))
	for i, blk := range blocks {
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i+1, err)
		}
		certs = append(certs, c)
	}
	return certs, nil
}

// loadJKS reads a JKS store and checks its integrity with password. Java
// can open a JKS truststore without a password (skipping the check); the
// library used here cannot, so the password is required.
func loadJKS(b []byte, password secret.Secret, path, loc, pw string) (keystore.KeyStore, error) {
	if !password.IsSet() {
		return keystore.KeyStore{}, propErr(pw, fmt.Errorf("required to open the JKS store %s", path))
	}
	ks := keystore.New()
	pass := []byte(password.Reveal())
	defer clear(pass)
	if err := ks.Load(bytes.NewReader(b), pass); err != nil {
		if strings.Contains(err.Error(), "invalid digest") {
			return keystore.KeyStore{}, propErr(pw, fmt.Errorf("wrong password for the JKS store %s (or the store is damaged)", path))
		}
		// The library's other errors describe the file's structure only.
		return keystore.KeyStore{}, propErr(loc, fmt.Errorf("not a readable JKS store (check ssl.*.type): %w", err))
	}
	return ks, nil
}

// jksTrusted returns the trusted certificate entries of a JKS truststore.
func jksTrusted(b []byte, password secret.Secret, path, loc, pw string) ([]*x509.Certificate, error) {
	ks, err := loadJKS(b, password, path, loc, pw)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, alias := range ks.Aliases() {
		if !ks.IsTrustedCertificateEntry(alias) {
			continue
		}
		e, err := ks.GetTrustedCertificateEntry(alias)
		if err != nil {
			return nil, propErr(loc, fmt.Errorf("entry %q: %w", alias, err))
		}
		c, err := x509.ParseCertificate(e.Certificate.Content)
		if err != nil {
			return nil, propErr(loc, fmt.Errorf("entry %q: %w", alias, err))
		}
		certs = append(certs, c)
	}
	return certs, nil
}

// pkcs12Err names the setting behind a PKCS12 decoding error: the password
// when it is wrong (or missing), else the file.
func pkcs12Err(err error, what, path, loc, pw string, password secret.Secret) error {
	if errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption) {
		if !password.IsSet() {
			return propErr(pw, fmt.Errorf("required: the PKCS12 %s %s is password-protected", what, path))
		}
		return propErr(pw, fmt.Errorf("wrong password for the PKCS12 %s %s", what, path))
	}
	// go-pkcs12's other errors describe the file's structure only.
	return propErr(loc, fmt.Errorf("not a readable PKCS12 %s (check ssl.*.type): %w", what, err))
}

// clientCertificate returns the mutual-TLS client certificate, if any.
// Errors never contain key material or passwords.
func clientCertificate(s Settings) (tls.Certificate, bool, error) {
	const loc, pw, kpw = "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"
	switch {
	case s.SSLKeystoreLocation != "":
		b, err := os.ReadFile(s.SSLKeystoreLocation)
		if err != nil {
			return tls.Certificate{}, false, propErr(loc, err)
		}
		var cert tls.Certificate
		switch t := storeType(s.SSLKeystoreType, b); t {
		case StorePEM:
			if s.SSLKeystorePassword.IsSet() {
				return tls.Certificate{}, false, propErr(pw, errors.New("must not be set for a PEM keystore: an encrypted PEM key takes ssl.key.password"))
			}
			certs, keys, err := pemBlocks(b)
			if err != nil {
				return tls.Certificate{}, false, propErr(loc, err)
			}
			if len(keys) != 1 {
				return tls.Certificate{}, false, propErr(loc, fmt.Errorf("want exactly one PEM private key block, found %d", len(keys)))
			}
			cert, err = pemKeyPair(certs, keys[0], s.SSLKeyPassword, loc, s.SSLKeystoreLocation)
			if err != nil {
				return tls.Certificate{}, false, err
			}
		case StoreJKS:
			cert, err = jksKeyPair(b, s, loc, pw, kpw)
			if err != nil {
				return tls.Certificate{}, false, err
			}
		case StorePKCS12:
			// A PKCS12 store made by keytool protects its key with the
			// store password; go-pkcs12 opens both with one password.
			if s.SSLKeyPassword.IsSet() && s.SSLKeyPassword.Reveal() != s.SSLKeystorePassword.Reveal() {
				return tls.Certificate{}, false, propErr(kpw, errors.New("differs from ssl.keystore.password, but a PKCS12 keystore's key is opened with the store password: unset ssl.key.password or set it to the store password"))
			}
			key, leaf, chain, err := pkcs12.DecodeChain(b, s.SSLKeystorePassword.Reveal())
			if err != nil {
				return tls.Certificate{}, false, pkcs12Err(err, "keystore", s.SSLKeystoreLocation, loc, pw, s.SSLKeystorePassword)
			}
			cert = tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
			for _, c := range chain {
				cert.Certificate = append(cert.Certificate, c.Raw)
			}
		default:
			return tls.Certificate{}, false, propErr("ssl.keystore.type", fmt.Errorf("%q is not supported (want JKS, PKCS12 or PEM)", t))
		}
		return cert, true, nil
	case s.SSLKeystoreKey.IsSet() || s.SSLKeystoreCertificateChain != "":
		const name = "ssl.keystore.key"
		if !s.SSLKeystoreKey.IsSet() || s.SSLKeystoreCertificateChain == "" {
			return tls.Certificate{}, false, propErr("ssl.keystore.certificate.chain", errors.New("ssl.keystore.key and ssl.keystore.certificate.chain must be set together"))
		}
		if t := strings.ToUpper(strings.TrimSpace(s.SSLKeystoreType)); t != "" && t != StorePEM {
			return tls.Certificate{}, false, propErr("ssl.keystore.type", fmt.Errorf("must be PEM (or empty) with %s", name))
		}
		_, keys, err := pemBlocks([]byte(s.SSLKeystoreKey.Reveal()))
		if err != nil {
			return tls.Certificate{}, false, propErr(name, err)
		}
		if len(keys) != 1 {
			return tls.Certificate{}, false, propErr(name, fmt.Errorf("want exactly one PEM private key block, found %d", len(keys)))
		}
		certs, _, err := pemBlocks([]byte(s.SSLKeystoreCertificateChain))
		if err != nil {
			return tls.Certificate{}, false, propErr("ssl.keystore.certificate.chain", err)
		}
		cert, err := pemKeyPair(certs, keys[0], s.SSLKeyPassword, name, name)
		if err != nil {
			return tls.Certificate{}, false, err
		}
		return cert, true, nil
	}
	if s.SSLKeyPassword.IsSet() {
		return tls.Certificate{}, false, propErr(kpw, errors.New("set, but there is no client key (ssl.keystore.location or ssl.keystore.key)"))
	}
	if s.SSLKeystorePassword.IsSet() {
		return tls.Certificate{}, false, propErr(pw, errors.New("set, but ssl.keystore.location is not"))
	}
	return tls.Certificate{}, false, nil
}

// jksKeyPair returns the client certificate of a JKS keystore: its one
// private key entry, opened with ssl.key.password or, as Java's keytool
// makes them by default, the store password.
func jksKeyPair(b []byte, s Settings, loc, pw, kpw string) (tls.Certificate, error) {
	ks, err := loadJKS(b, s.SSLKeystorePassword, s.SSLKeystoreLocation, loc, pw)
	if err != nil {
		return tls.Certificate{}, err
	}
	var aliases []string
	for _, a := range ks.Aliases() {
		if ks.IsPrivateKeyEntry(a) {
			aliases = append(aliases, a)
		}
	}
	if len(aliases) != 1 {
		return tls.Certificate{}, propErr(loc, fmt.Errorf("want exactly one private key entry in the JKS keystore, found %d", len(aliases)))
	}
	keyPass, keyPassName := s.SSLKeystorePassword, pw
	if s.SSLKeyPassword.IsSet() {
		keyPass, keyPassName = s.SSLKeyPassword, kpw
	}
	pass := []byte(keyPass.Reveal())
	defer clear(pass)
	e, err := ks.GetPrivateKeyEntry(aliases[0], pass)
	if err != nil {
		// keystore-go reports a wrong key password as a decryption failure.
		return tls.Certificate{}, propErr(keyPassName, fmt.Errorf("cannot open the private key %q of the JKS store %s: wrong password?", aliases[0], s.SSLKeystoreLocation))
	}
	key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
	if err != nil {
		return tls.Certificate{}, propErr(loc, fmt.Errorf("private key %q: %w", aliases[0], err))
	}
	cert := tls.Certificate{PrivateKey: key}
	for _, c := range e.CertificateChain {
		cert.Certificate = append(cert.Certificate, c.Content)
	}
	return checkPair(cert, loc)
}

// pemKeyPair builds the client certificate from PEM certificates and a PEM
// key (PKCS#8, encrypted with ssl.key.password or not; or an unencrypted
// PKCS#1/SEC 1 key). Kafka accepts only PKCS#8 for encrypted keys; so does
// this.
func pemKeyPair(certs []*pem.Block, key *pem.Block, password secret.Secret, name, where string) (tls.Certificate, error) {
	const kpw = "ssl.key.password"
	if len(certs) == 0 {
		return tls.Certificate{}, propErr(name, errors.New("no PEM CERTIFICATE block for the client key"))
	}
	var priv crypto.PrivateKey
	switch {
	case key.Type == "ENCRYPTED PRIVATE KEY":
		if !password.IsSet() {
			return tls.Certificate{}, propErr(kpw, fmt.Errorf("required: the private key in %s is encrypted", where))
		}
		k, _, err := pkcs8.ParsePrivateKey(key.Bytes, []byte(password.Reveal()))
		if err != nil {
			if strings.Contains(err.Error(), "incorrect password") {
				return tls.Certificate{}, propErr(kpw, fmt.Errorf("wrong password for the encrypted private key in %s", where))
			}
			// pkcs8's other errors name unsupported algorithms or structure.
			return tls.Certificate{}, propErr(name, fmt.Errorf("encrypted private key: %w", err))
		}
		priv = k
	case key.Headers["Proc-Type"] != "":
		return tls.Certificate{}, propErr(name, errors.New("legacy OpenSSL-encrypted keys (Proc-Type: 4,ENCRYPTED) are not supported, as in Kafka: convert to encrypted PKCS#8, e.g. openssl pkcs8 -topk8 -v2 aes-256-cbc"))
	default:
		if password.IsSet() {
			return tls.Certificate{}, propErr(kpw, fmt.Errorf("set, but the private key in %s is not encrypted; unset it", where))
		}
		var err error
		if priv, err = parsePlainKey(key); err != nil {
			return tls.Certificate{}, propErr(name, err)
		}
	}
	cert := tls.Certificate{PrivateKey: priv}
	for _, c := range certs {
		cert.Certificate = append(cert.Certificate, c.Bytes)
	}
	return checkPair(cert, name)
}

// parsePlainKey parses an unencrypted PKCS#8, PKCS#1 or SEC 1 key.
func parsePlainKey(b *pem.Block) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	// The parsers' errors would describe the key bytes; say only what failed.
	return nil, fmt.Errorf("the %s block is not a PKCS#8, PKCS#1 or SEC 1 private key", b.Type)
}

// checkPair parses the leaf certificate and checks that it matches the key.
func checkPair(cert tls.Certificate, name string) (tls.Certificate, error) {
	if len(cert.Certificate) == 0 {
		return tls.Certificate{}, propErr(name, errors.New("no certificate for the client key"))
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return tls.Certificate{}, propErr(name, fmt.Errorf("client certificate: %w", err))
	}
	pub, ok := cert.PrivateKey.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, propErr(name, errors.New("unsupported private key type"))
	}
	eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !eq.Equal(leaf.PublicKey) {
		return tls.Certificate{}, propErr(name, errors.New("client certificate and key: the first certificate does not belong to the private key"))
	}
	cert.Leaf = leaf
	return cert, nil
}

// pemBlocks splits PEM data into certificates and private keys. Other block
// types are an error; so is non-PEM data.
func pemBlocks(b []byte) (certs, keys []*pem.Block, err error) {
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch {
		case blk.Type == "CERTIFICATE":
			certs = append(certs, blk)
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			keys = append(keys, blk)
		default:
			return nil, nil, fmt.Errorf("unexpected PEM block type %q", blk.Type)
		}
	}
	if len(certs) == 0 && len(keys) == 0 {
		return nil, nil, errors.New("not PEM data (set ssl.*.type to JKS or PKCS12 for those stores)")
	}
	return certs, keys, nil
}
