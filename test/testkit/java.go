package testkit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var javaBuilds sync.Map // source file -> *javaBuild

type javaBuild struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// KafkaLib returns the directory of the harness's Kafka jars (MM2GO_TEST_KAFKA_LIB), or ends the
// test: a skip on a developer machine, a failure under CI=true.
func KafkaLib(t testing.TB) string {
	t.Helper()
	lib := os.Getenv(EnvKafkaLib)
	if lib == "" {
		msg := EnvKafkaLib + " is not set: this test runs genuine MM2 classes from the harness jars (eval \"$(test/kafka/kafka.sh env)\")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
		}
		t.Skip(msg)
	}
	return lib
}

// Java compiles test/java/<class>.java against the Kafka jars (once per test binary) and runs
// it with args and stdin, returning its standard output. A failure ends the test with the
// program's standard error.
func Java(t testing.TB, class, stdin string, args ...string) string {
	t.Helper()
	lib := KafkaLib(t)
	cp := filepath.Join(lib, "*")
	src := filepath.Join(RepoRoot(t), "test", "java", class+".java")
	v, _ := javaBuilds.LoadOrStore(src, &javaBuild{})
	b := v.(*javaBuild)
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "mm2go-java-")
		if b.err == nil {
			b.out, b.err = exec.Command("javac", "-cp", cp, "-d", b.dir, src).CombinedOutput()
		}
	})
	if b.err != nil {
		t.Fatalf("javac %s: %v\n%s", src, b.err, b.out)
	}
	cmd := exec.Command("java", append([]string{"-cp", b.dir + string(filepath.ListSeparator) + cp, class}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java %s %s: %v\n%s", class, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
