// GroupConsumer is a genuine Kafka consumer (the Kafka jars' KafkaConsumer, classic group
// protocol) that joins a consumer group on a topic and prints, for every partition, where the
// group's committed offset puts it and the first record it then reads. Go tests use it to prove
// that a group moved by `mirror cutover` goes on at exactly the right record.
//
// Compile and run with the harness jars:
//   javac -cp "$MM2GO_TEST_KAFKA_LIB/*" -d DIR test/java/GroupConsumer.java
//   java -cp "DIR:$MM2GO_TEST_KAFKA_LIB/*" GroupConsumer TOPIC GROUP < client.properties
//
// Standard input holds the client properties (bootstrap.servers and security settings).
// auto.offset.reset is none: a partition without a committed offset is an error. Nothing is
// committed.
//
// Output, one line per partition, sorted by partition:
//   "<partition> <position> end"                                 nothing to read at the position
//   "<partition> <position> <offset> <key base64> <value base64>" the first record read
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupConsumer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: GroupConsumer TOPIC GROUP < client.properties");
            System.exit(2);
        }
        String topic = args[0];
        Properties props = new Properties();
        props.load(System.in);
        props.put("group.id", args[1]);
        props.put("auto.offset.reset", "none");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Base64.Encoder b64 = Base64.getEncoder();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            Map<Integer, String> lines = new TreeMap<>();
            Map<Integer, Long> positions = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 90_000;
            while (System.currentTimeMillis() < deadline) {
                var records = consumer.poll(Duration.ofMillis(500));
                Set<TopicPartition> assigned = consumer.assignment();
                if (assigned.isEmpty()) {
                    continue;
                }
                if (positions.isEmpty()) {
                    Map<TopicPartition, Long> ends = consumer.endOffsets(assigned);
                    for (TopicPartition tp : assigned) {
                        var committed = consumer.committed(Set.of(tp)).get(tp);
                        if (committed == null) {
                            throw new IllegalStateException("no committed offset for " + tp);
                        }
                        positions.put(tp.partition(), committed.offset());
                        if (committed.offset() >= ends.get(tp)) {
                            lines.put(tp.partition(), tp.partition() + " " + committed.offset() + " end");
                        }
                    }
                }
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    lines.putIfAbsent(r.partition(), r.partition() + " " + positions.get(r.partition()) + " " + r.offset() + " "
                        + b64.encodeToString(r.key() == null ? new byte[0] : r.key()) + " "
                        + b64.encodeToString(r.value() == null ? new byte[0] : r.value()));
                }
                List<PartitionInfo> parts = consumer.partitionsFor(topic);
                if (!positions.isEmpty() && lines.size() == parts.size()) {
                    break;
                }
            }
            List<PartitionInfo> parts = consumer.partitionsFor(topic);
            if (lines.size() != parts.size()) {
                throw new IllegalStateException("read " + lines.size() + " of " + parts.size() + " partitions: " + lines);
            }
            for (String l : new ArrayList<>(lines.values())) {
                System.out.println(l);
            }
        }
    }
}
