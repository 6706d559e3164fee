#!/usr/bin/env bash
# kafka.sh: run genuine Apache Kafka (KRaft, single combined broker+controller node) and
# MirrorMaker 2 from Maven Central jars, on loopback, for mm2go's tests and benchmarks.
#
#   kafka.sh install                      download the pinned jars once (test/kafka/pom.xml, and
#                                         the OIDC issuer's, test/kafka/oidc/pom.xml)
#   kafka.sh start NAME PORT [k=v ...]    format and start cluster NAME; PORT is PLAINTEXT,
#                                         PORT+1 the controller, PORT+2 SASL_SSL (PLAIN and SCRAM);
#                                         extra k=v pairs are broker settings
#   kafka.sh stop NAME                    stop cluster NAME (SIGTERM, then SIGKILL) and wipe its data
#   kafka.sh pause NAME | resume NAME     stop / restart a cluster's process, keeping its data
#   kafka.sh freeze NAME | thaw NAME      hang a cluster (SIGSTOP: connections stay open, nothing
#                                         answers) / let it go on (SIGCONT)
#   kafka.sh env                          print `export MM2GO_TEST_...` lines for the running clusters
#   kafka.sh mm2 start NAME FILE          start MirrorMaker 2 (dedicated mode) with properties FILE
#   kafka.sh mm2 stop NAME                stop it cleanly
#   kafka.sh tool CLASS [args ...]        run a Kafka command-line tool class from the same jars
#   kafka.sh rss NAME                     resident memory of NAME's process, in KiB
#   kafka.sh install-version [V ...]      download the broker jars of Kafka V (all of
#                                         test/kafka/versions/ without V), each into its own cache
#   kafka.sh start-version V NAME PORT [k=v ...]
#                                         start cluster NAME on Kafka V's broker, as `start` does
#
# MM2GO_KAFKA_VERSION=V makes `start` do what `start-version V` does; `resume` runs a cluster on
# the version it was started with. MirrorMaker 2 and `tool` always use the pinned jars.
#
# Extra k=v settings are appended to server.properties, so they override the defaults (e.g. a
# different `listeners=` line with an extra OAUTHBEARER listener). MM2GO_KAFKA_OPTS adds JVM flags.
#
# State (jars, configs, data, logs) lives under $MM2GO_KAFKA_HOME, default test/kafka/state;
# jars are cached in test/kafka/.cache/lib, Kafka V's broker jars in test/kafka/.cache/lib-V
# (from test/kafka/versions/V/pom.xml). Logs: $MM2GO_KAFKA_HOME/NAME/logs/stdout.log.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${MM2GO_KAFKA_HOME:-$here/state}"
lib="${MM2GO_KAFKA_LIB:-$here/.cache/lib}"
pinned_lib="$lib"
# The Kafka version of the cluster being started or resumed; empty: the pinned test/kafka/pom.xml.
version=""
# The local OIDC issuer's jars (test/kafka/oidc/pom.xml), on a classpath of their own.
oidc_lib="${MM2GO_OIDC_LIB:-$here/.cache/oidc-lib}"
jvm_perf='-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true'
heap="${MM2GO_KAFKA_HEAP:--Xms128m -Xmx512m}"

# Credentials of the SASL_SSL listener. Test-only values, documented in docs/design.md.
plain_user=alice
plain_pass=alice-secret
scram_user=scram-user
scram_pass=scram-secret
eh_conn='Endpoint=sb://localhost/;SharedAccessKeyName=test;SharedAccessKey=fake-key-do-not-log'

die() { echo "kafka.sh: $*" >&2; exit 1; }
log() { echo "kafka.sh: $*" >&2; }

# install_pom POM DIR JAR copies POM's dependencies into DIR once (again when POM changes);
# JAR is a glob of a jar that a complete copy holds.
install_pom() {
  local pom="$1" dir="$2" jar="$3" stamp="$2/.pom.sha" sum
  sum="$(sha256sum "$pom" | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]] && compgen -G "$dir/$jar" >/dev/null; then
    return 0
  fi
  command -v mvn >/dev/null || die "Maven (mvn) is required to download the Kafka jars"
  command -v java >/dev/null || die "Java 17+ is required to run Kafka"
  log "downloading the jars of $pom with Maven into $dir (first run only)"
  rm -rf "$dir" && mkdir -p "$dir"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dir" \
    || die "Maven could not fetch the jars of $pom (see output above)"
  echo "$sum" >"$stamp"
}

install() { install_pom "$here/pom.xml" "$pinned_lib" 'connect-mirror-*.jar'; }

# use_version V points lib at Kafka V's broker jars (test/kafka/versions/V/pom.xml).
use_version() {
  local v="$1"
  [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ && -f "$here/versions/$v/pom.xml" ]] \
    || die "no Kafka version '$v': versions are the folders of $here/versions ($(ls "$here/versions" | tr '\n' ' '))"
  version="$v"
  lib="$(dirname "$pinned_lib")/lib-$v"
}

install_version() {
  install_pom "$here/versions/$version/pom.xml" "$lib" "kafka_2.13-$version.jar"
}

# install_versions [V ...] fetches the broker jars of each version (every versions/ folder without V).
install_versions() {
  local v vs=("$@")
  if [[ ${#vs[@]} -eq 0 ]]; then
    for v in "$here"/versions/*/pom.xml; do vs+=("$(basename "$(dirname "$v")")"); done
  fi
  mkdir -p "$home" "$(dirname "$pinned_lib")"
  for v in "${vs[@]}"; do
    use_version "$v"
    # The same lock as prepare: parallel starts of one version fetch it once.
    ( flock 9; install_version ) 9>"$home/.prepare.lock"
  done
}

# install_oidc fetches the local OIDC issuer (mock-oauth2-server) once, like install.
install_oidc() {
  local stamp="$oidc_lib/.pom.sha" sum
  sum="$(sha256sum "$here/oidc/pom.xml" | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]] && ls "$oidc_lib"/mock-oauth2-server-*.jar >/dev/null 2>&1; then
    return 0
  fi
  command -v mvn >/dev/null || die "Maven (mvn) is required to download the OIDC issuer jars"
  log "downloading the OIDC issuer jars with Maven into $oidc_lib (first run only)"
  rm -rf "$oidc_lib" && mkdir -p "$oidc_lib"
  mvn -q -B -f "$here/oidc/pom.xml" dependency:copy-dependencies -DoutputDirectory="$oidc_lib" \
    || die "Maven could not fetch the OIDC issuer jars (see output above)"
  echo "$sum" >"$stamp"
}

log4j_files() {
  mkdir -p "$home"
  [[ -f "$home/log4j2-server.properties" ]] || cat >"$home/log4j2-server.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.req.name = kafka.request.logger
logger.req.level = WARN
EOF
  [[ -f "$home/log4j2-tools.properties" ]] || cat >"$home/log4j2-tools.properties" <<'EOF'
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
EOF
  # Kafka 3.x brokers log through the Log4j 1 API (reload4j, test/kafka/versions/3.*).
  [[ -f "$home/log4j-server.properties" ]] || cat >"$home/log4j-server.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
EOF
  [[ -f "$home/log4j-tools.properties" ]] || cat >"$home/log4j-tools.properties" <<'EOF'
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
}

# certs creates, once per harness home, a CA and a server certificate for 127.0.0.1/localhost.
certs() {
  local d="$home/certs"
  [[ -f "$d/server.pem" ]] && return 0
  command -v openssl >/dev/null || die "openssl is required to create the test certificates"
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 \
      -subj /CN=mm2go-test-ca >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
      -subj /CN=localhost >/dev/null 2>&1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt \
      -days 30 -extfile ext.cnf >/dev/null 2>&1
    openssl pkcs8 -topk8 -nocrypt -in server.key -out server.p8
    cat server.p8 server.crt ca.pem >server.pem
  ) || die "creating test certificates failed"
}

java_tool() {
  java -Xmx256m $jvm_perf -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$home/log4j2-tools.properties" \
    -Dlog4j.configuration="file:$home/log4j-tools.properties" -cp "$lib/*" "$@"
}

# cluster_id prints a random cluster id as `kafka-storage random-uuid` does (16 random bytes,
# URL-safe base64 without padding, never starting with '-'), without a JVM start of its own.
cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    [[ "$id" != -* ]] && { echo "$id"; return; }
  done
}

pidfile() { echo "$home/$1/pid"; }

running() {
  local pf
  pf="$(pidfile "$1")"
  [[ -f "$pf" ]] && kill -0 "$(cat "$pf")" 2>/dev/null
}

write_config() {
  local name="$1" port="$2"
  shift 2
  local dir="$home/$name" ctl=$((port + 1)) sasl=$((port + 2))
  mkdir -p "$dir/data" "$dir/logs"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$ctl
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl,SASL_SSL://127.0.0.1:$sasl
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sasl
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.dedupe.buffer.size=2097152
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
# Tests write explicit old timestamps: never delete by time.
log.retention.ms=-1
auto.create.topics.enable=false
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$home/certs/server.pem
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required ;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required ;
EOF
  # The PLAIN entry holds a '$' user name: written with printf, never through the shell's expansion.
  printf 'listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s" user_%s="%s";\n' \
    "$plain_user" "$plain_pass" '$ConnectionString' "$eh_conn" >>"$dir/server.properties"
  local kv
  for kv in "$@"; do echo "$kv" >>"$dir/server.properties"; done
  echo "$port" >"$dir/port"
  if [[ -n "$version" ]]; then echo "$version" >"$dir/version"; fi
}

wait_started() {
  local name="$1" deadline=$((SECONDS + ${MM2GO_KAFKA_START_TIMEOUT:-90}))
  local out="$home/$name/logs/stdout.log"
  until grep -q 'Kafka Server started' "$out" 2>/dev/null; do
    running "$name" || { tail -40 "$out" >&2 || true; die "cluster $name exited during start; log: $out"; }
    ((SECONDS < deadline)) || { tail -40 "$out" >&2 || true; die "cluster $name did not start in time; log: $out"; }
    sleep 0.2
  done
}

launch() {
  local name="$1" dir="$home/$1"
  : >"$dir/logs/stdout.log"
  # setsid: the broker must not die with the shell that started it, and gets its own group.
  # MM2GO_KAFKA_OPTS: extra JVM flags for this broker (e.g. OAUTHBEARER allowed URLs).
  setsid java $heap $jvm_perf ${MM2GO_KAFKA_OPTS:-} -Dkafka.logs.dir="$dir/logs" \
    -Dlog4j2.configurationFile="$home/log4j2-server.properties" \
    -Dlog4j.configuration="file:$home/log4j-server.properties" \
    -cp "$lib/*" kafka.Kafka "$dir/server.properties" >>"$dir/logs/stdout.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

# prepare downloads the jars and writes shared files once, under a lock, so that several
# clusters can be started in parallel.
prepare() {
  mkdir -p "$home" "$(dirname "$lib")"
  (
    flock 9
    if [[ -n "$version" ]]; then
      install_version
    else
      install
      install_oidc
    fi
    log4j_files
    certs
  ) 9>"$home/.prepare.lock"
}

start() {
  [[ $# -ge 2 ]] || die "usage: kafka.sh start NAME PORT [k=v ...]"
  local name="$1" port="$2"
  shift 2
  prepare
  if running "$name"; then die "cluster $name is already running (pid $(cat "$(pidfile "$name")"))"; fi
  rm -rf "${home:?}/$name"
  write_config "$name" "$port" "$@"
  local t0=$SECONDS id
  id="$(cluster_id)"
  java_tool kafka.tools.StorageTool format -t "$id" -c "$home/$name/server.properties" \
    -S "SCRAM-SHA-256=[name=$scram_user,password=$scram_pass]" \
    -S "SCRAM-SHA-512=[name=$scram_user,password=$scram_pass]" >"$home/$name/logs/format.log" 2>&1 \
    || { cat "$home/$name/logs/format.log" >&2; die "formatting storage of $name failed"; }
  local tf=$SECONDS
  launch "$name"
  wait_started "$name"
  log "cluster $name up on 127.0.0.1:$port (SASL_SSL $((port + 2))) pid $(cat "$(pidfile "$name")"); format $((tf - t0))s, start $((SECONDS - tf))s"
}

stop_pid() {
  local pf="$1" pid i
  [[ -f "$pf" ]] || return 0
  pid="$(cat "$pf")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pf"
}

stop() {
  [[ $# -ge 1 ]] || die "usage: kafka.sh stop NAME"
  stop_pid "$(pidfile "$1")"
  rm -rf "${home:?}/$1/data"
}

pause() { stop_pid "$(pidfile "$1")"; }

resume() {
  [[ -f "$home/$1/server.properties" ]] || die "cluster $1 was never started"
  running "$1" && return 0
  if [[ -f "$home/$1/version" ]]; then use_version "$(cat "$home/$1/version")"; fi
  launch "$1"
  wait_started "$1"
}

# freeze and thaw signal the broker's whole process group (launch gives it its own with setsid).
freeze() { running "$1" || die "cluster $1 is not running"; kill -STOP -- "-$(cat "$(pidfile "$1")")"; }
thaw() { [[ -f "$(pidfile "$1")" ]] || die "cluster $1 was never started"; kill -CONT -- "-$(cat "$(pidfile "$1")")"; }

env_lines() {
  local d name port
  for d in "$home"/*/; do
    name="$(basename "$d")"
    [[ -f "$d/port" ]] || continue
    running "$name" || continue
    port="$(cat "$d/port")"
    local up
    up="$(echo "$name" | tr '[:lower:]-' '[:upper:]_')"
    echo "export MM2GO_TEST_${up}=127.0.0.1:$port"
    echo "export MM2GO_TEST_${up}_SASL_SSL=127.0.0.1:$((port + 2))"
  done
  echo "export MM2GO_TEST_CA=$home/certs/ca.pem"
  echo "export MM2GO_TEST_KAFKA_HOME=$home"
  echo "export MM2GO_TEST_KAFKA_LIB=$lib"
  echo "export MM2GO_TEST_OIDC_LIB=$oidc_lib"
}

mm2() {
  local cmd="${1:-}" name="${2:-}"
  [[ -n "$cmd" && -n "$name" ]] || die "usage: kafka.sh mm2 start|stop NAME [FILE]"
  case "$cmd" in
    start)
      local file="${3:-}"
      [[ -f "$file" ]] || die "mm2 start: properties file '$file' not found"
      prepare
      running "$name" && die "MirrorMaker 2 $name is already running"
      mkdir -p "$home/$name/logs"
      : >"$home/$name/logs/stdout.log"
      setsid java $heap $jvm_perf -Dkafka.logs.dir="$home/$name/logs" \
        -Dlog4j2.configurationFile="$home/log4j2-server.properties" \
        -cp "$lib/*" org.apache.kafka.connect.mirror.MirrorMaker "$file" \
        >>"$home/$name/logs/stdout.log" 2>&1 </dev/null &
      echo $! >"$(pidfile "$name")"
      log "MirrorMaker 2 $name started, pid $!; log $home/$name/logs/stdout.log"
      ;;
    stop) stop_pid "$(pidfile "$name")" ;;
    *) die "usage: kafka.sh mm2 start|stop NAME [FILE]" ;;
  esac
}

rss() {
  local pf
  pf="$(pidfile "$1")"
  [[ -f "$pf" ]] || die "no process for $1"
  awk '/VmRSS/ {print $2}' "/proc/$(cat "$pf")/status"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  install) prepare ;;
  start)
    if [[ -n "${MM2GO_KAFKA_VERSION:-}" ]]; then use_version "$MM2GO_KAFKA_VERSION"; fi
    start "$@"
    ;;
  start-version)
    [[ $# -ge 3 ]] || die "usage: kafka.sh start-version V NAME PORT [k=v ...]"
    use_version "$1"
    shift
    start "$@"
    ;;
  install-version) install_versions "$@" ;;
  stop) stop "$@" ;;
  pause) pause "$@" ;;
  resume) resume "$@" ;;
  freeze) freeze "$@" ;;
  thaw) thaw "$@" ;;
  env) env_lines ;;
  mm2) mm2 "$@" ;;
  tool) prepare; java_tool "$@" ;;
  rss) rss "$@" ;;
  *) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
