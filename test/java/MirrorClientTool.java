// MirrorClientTool runs genuine MirrorMaker 2 client code (connect-mirror-client's
// RemoteClusterUtils) against one cluster and prints the answers one per line, sorted, so Go
// tests can compare them with what mm2go wrote.
//
// Compile and run with the harness jars:
//   javac -cp "$MM2GO_TEST_KAFKA_LIB/*" -d DIR test/java/MirrorClientTool.java
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" MirrorClientTool translate BOOTSTRAP REMOTE_ALIAS GROUP
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" MirrorClientTool upstream BOOTSTRAP
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" MirrorClientTool hops BOOTSTRAP REMOTE_ALIAS
//
// Output:
//   translate: "<topic> <partition> <offset> <metadata>" per partition (RemoteClusterUtils.translateOffsets)
//   upstream:  one alias per line (RemoteClusterUtils.upstreamClusters)
//   hops:      the number of hops (RemoteClusterUtils.replicationHops)
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class MirrorClientTool {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MirrorClientTool translate|upstream|hops BOOTSTRAP [ARGS]");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[1]);
        Duration timeout = Duration.ofSeconds(60);
        switch (args[0]) {
            case "translate": {
                Map<TopicPartition, OffsetAndMetadata> offsets =
                    RemoteClusterUtils.translateOffsets(props, args[2], args[3], timeout);
                List<String> lines = new ArrayList<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    lines.add(e.getKey().topic() + " " + e.getKey().partition() + " "
                        + e.getValue().offset() + " " + e.getValue().metadata());
                }
                lines.sort(null);
                for (String l : lines) {
                    System.out.println(l);
                }
                break;
            }
            case "upstream":
                for (String alias : new TreeSet<>(RemoteClusterUtils.upstreamClusters(props))) {
                    System.out.println(alias);
                }
                break;
            case "hops":
                System.out.println(RemoteClusterUtils.replicationHops(props, args[2]));
                break;
            default:
                System.err.println("unknown command " + args[0]);
                System.exit(2);
        }
    }
}
