// MM2Rules prints what genuine MirrorMaker 2 classes (connect-mirror, connect-mirror-client) decide,
// so Go tests can compare mm2go with MM2 itself rather than with a copy of its rules.
//
// Compile and run with the harness jars:
//   javac -cp "$MM2GO_TEST_KAFKA_LIB/*" -d DIR test/java/MM2Rules.java
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" MM2Rules keys
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" MM2Rules names < names.txt
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" MM2Rules json < hex.txt
//
// keys:  one line per key of MirrorSourceConfig, MirrorCheckpointConfig, MirrorHeartbeatConfig,
//        MirrorConnectorConfig and MirrorMakerConfig (their ConfigDefs, read by reflection):
//        "<key>\t<configs, comma separated>\t<default>" where default is the ConfigDef default as
//        a string, "<required>" when there is none and "<hidden>" for passwords.
// names: for each name on standard input, "<name>\t<isInternalTopic>\t<topic filter>\t<group
//        filter>" from DefaultReplicationPolicy, DefaultTopicFilter and DefaultGroupFilter
//        configured with MM2's defaults (true/false each).
// json:  for each line of standard input, the hex of some bytes: those bytes decoded as Kafka's
//        protocol reader decodes a string (Utils.utf8), then "<hex of the string as JsonConverter
//        writes it>\t<hex of the Connect offsets key of a checkpoint of that group for topic t
//        partition 0>", both written by the JsonConverter of Connect's internal offsets topic
//        (schemas.enable=false) as MirrorCheckpointTask's source partition is.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.DefaultGroupFilter;
import org.apache.kafka.connect.mirror.DefaultReplicationPolicy;
import org.apache.kafka.connect.mirror.DefaultTopicFilter;

public class MM2Rules {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: MM2Rules keys|names|json");
            System.exit(2);
        }
        switch (args[0]) {
            case "keys":
                keys();
                break;
            case "names":
                names();
                break;
            case "json":
                json();
                break;
            default:
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
        }
    }

    private static ConfigDef staticDef(String cls, String field) throws Exception {
        Field f = Class.forName("org.apache.kafka.connect.mirror." + cls).getDeclaredField(field);
        f.setAccessible(true);
        return (ConfigDef) f.get(null);
    }

    private static void keys() throws Exception {
        Map<String, ConfigDef> defs = new TreeMap<>();
        defs.put("MirrorSourceConfig", staticDef("MirrorSourceConfig", "CONNECTOR_CONFIG_DEF"));
        defs.put("MirrorCheckpointConfig", staticDef("MirrorCheckpointConfig", "CONNECTOR_CONFIG_DEF"));
        defs.put("MirrorHeartbeatConfig", staticDef("MirrorHeartbeatConfig", "CONNECTOR_CONFIG_DEF"));
        defs.put("MirrorConnectorConfig", staticDef("MirrorConnectorConfig", "BASE_CONNECTOR_CONFIG_DEF"));
        Method m = Class.forName("org.apache.kafka.connect.mirror.MirrorMakerConfig").getDeclaredMethod("config");
        m.setAccessible(true);
        defs.put("MirrorMakerConfig", (ConfigDef) m.invoke(null));

        Map<String, TreeSet<String>> owners = new TreeMap<>();
        Map<String, String> defaults = new HashMap<>();
        for (Map.Entry<String, ConfigDef> e : defs.entrySet()) {
            for (ConfigDef.ConfigKey k : e.getValue().configKeys().values()) {
                owners.computeIfAbsent(k.name, x -> new TreeSet<>()).add(e.getKey());
                String def;
                if (!k.hasDefault()) {
                    def = "<required>";
                } else if (k.type == ConfigDef.Type.PASSWORD) {
                    def = "<hidden>";
                } else if (k.defaultValue == null) {
                    def = "null";
                } else {
                    def = ConfigDef.convertToString(k.defaultValue, k.type);
                }
                defaults.putIfAbsent(k.name, def);
            }
        }
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, TreeSet<String>> e : owners.entrySet()) {
            out.append(e.getKey()).append('\t').append(String.join(",", e.getValue())).append('\t')
                .append(defaults.get(e.getKey()).replace("\n", "\\n").replace("\t", "\\t")).append('\n');
        }
        System.out.print(out);
    }

    private static void names() throws Exception {
        DefaultReplicationPolicy policy = new DefaultReplicationPolicy();
        policy.configure(new HashMap<>());
        DefaultTopicFilter topics = new DefaultTopicFilter();
        topics.configure(new HashMap<>());
        DefaultGroupFilter groups = new DefaultGroupFilter();
        groups.configure(new HashMap<>());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String name; (name = in.readLine()) != null; ) {
            if (name.isEmpty()) {
                continue;
            }
            out.append(name).append('\t').append(policy.isInternalTopic(name)).append('\t')
                .append(topics.shouldReplicateTopic(name)).append('\t')
                .append(groups.shouldReplicateGroup(name)).append('\n');
        }
        System.out.print(out);
    }

    private static void json() throws Exception {
        JsonConverter converter = new JsonConverter();
        Map<String, Object> conf = new HashMap<>();
        conf.put("schemas.enable", "false");
        converter.configure(conf, true);
        Method partition = Checkpoint.class.getDeclaredMethod("connectPartition");
        partition.setAccessible(true);
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            byte[] raw = hex.parseHex(line.trim());
            String s = Utils.utf8(ByteBuffer.wrap(raw), raw.length);
            Checkpoint cp = new Checkpoint(s, new TopicPartition("t", 0), 0, 0, "");
            byte[] str = converter.fromConnectData("mm2-offsets", null, s);
            byte[] key = converter.fromConnectData("mm2-offsets", null,
                Arrays.asList("MirrorCheckpointConnector", partition.invoke(cp)));
            out.append(hex.formatHex(str)).append('\t').append(hex.formatHex(key)).append('\n');
        }
        System.out.print(out);
    }
}
