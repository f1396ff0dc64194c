import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer and consumer: for every codec (none, gzip, snappy, lz4, zstd) a topic
 * written by an idempotent producer with acks=all, one with acks=1 and one with acks=0, then
 * read back by an assigned consumer. Prints what was sent (with the offsets acknowledged) and
 * what was read, as JSON lines ("sent", "recv", "produce_error", "done").
 *
 * Usage: Clients BOOTSTRAP PREFIX COUNT
 */
public final class Clients {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final String[] ACKS = {"all", "1", "0"};
    static final int PARTITIONS = 3;
    static final long BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int count = Integer.parseInt(args[2]);
        List<String> topics = new ArrayList<>();
        for (String codec : CODECS) {
            for (String acks : ACKS) {
                topics.add(prefix + "-" + codec + "-acks" + acks);
            }
        }
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            List<NewTopic> newTopics = new ArrayList<>();
            for (String topic : topics) {
                newTopics.add(new NewTopic(topic, PARTITIONS, (short) 1));
            }
            admin.createTopics(newTopics).all().get();
            // Kafka before 4.5 (KAFKA-15591) can refuse an idempotent producer's first batch
            // forever when it reaches a partition its leader has not created yet while a
            // later batch arrives after: wait until every leader answers ListOffsets (the
            // admin client retries until it does).
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (String topic : topics) {
                for (int p = 0; p < PARTITIONS; p++) {
                    latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
                }
            }
            admin.listOffsets(latest).all().get();
        }
        for (String codec : CODECS) {
            for (String acks : ACKS) {
                produce(bootstrap, prefix + "-" + codec + "-acks" + acks, codec, acks, count);
            }
        }
        for (String topic : topics) {
            consume(bootstrap, topic, count);
        }
        Out.emit(Out.obj("done"));
    }

    static ProducerRecord<byte[], byte[]> record(String topic, int i) {
        byte[] key = i % 10 == 9 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
        byte[] value;
        if (i % 13 == 12) {
            value = null;
        } else {
            StringBuilder text = new StringBuilder("value-" + i + "|");
            for (int r = 0; r < i % 7; r++) {
                text.append("lorem ipsum dolor sit amet ").append(r).append(' ');
            }
            value = text.toString().getBytes(StandardCharsets.UTF_8);
            if (i % 5 == 0) {
                value[0] = (byte) 0xff;  // not UTF-8: bytes must come back as they went
            }
        }
        RecordHeaders headers = new RecordHeaders();
        if (i % 4 != 0) {
            headers.add("trace", ("t-" + i).getBytes(StandardCharsets.UTF_8));
            headers.add("dup", new byte[] {1});
            headers.add("dup", new byte[] {2});
            headers.add("empty", new byte[0]);
            headers.add("null", null);
        }
        return new ProducerRecord<>(topic, i % PARTITIONS, BASE_TS + i, key, value, headers);
    }

    static void produce(String bootstrap, String topic, String codec, String acks, int count)
            throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.ACKS_CONFIG, acks);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, acks.equals("all") ? "true" : "false");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "4096");  // several batches per partition
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<byte[], byte[]> record = record(topic, i);
                records.add(record);
                futures.add(producer.send(record));
            }
            producer.flush();
        }
        for (int i = 0; i < count; i++) {
            ProducerRecord<byte[], byte[]> record = records.get(i);
            ObjectNode line = Out.obj("sent");
            line.put("topic", topic).put("codec", codec).put("acks", acks).put("seq", i);
            try {
                RecordMetadata metadata = futures.get(i).get();
                line.put("partition", metadata.partition()).put("offset", metadata.offset());
            } catch (Exception error) {
                ObjectNode failed = Out.obj("produce_error");
                failed.put("topic", topic).put("seq", i).put("error", Out.error(error));
                Out.emit(failed);
                line.put("partition", record.partition()).putNull("offset");
            }
            line.put("key", Out.b64(record.key())).put("value", Out.b64(record.value()));
            line.put("timestamp", record.timestamp());
            line.set("headers", Out.headers(record.headers()));
            Out.emit(line);
        }
    }

    static void consume(String bootstrap, String topic, int count) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "8192");  // several fetches
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                partitions.add(new TopicPartition(topic, p));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(30));
            ObjectNode ends = Out.obj("end_offsets");
            ends.put("topic", topic);
            for (TopicPartition tp : partitions) {
                ends.put(Integer.toString(tp.partition()), end.get(tp));
            }
            Out.emit(ends);
            Map<TopicPartition, Long> next = new HashMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                boolean caughtUp = true;
                for (TopicPartition tp : partitions) {
                    if (consumer.position(tp) < end.get(tp)) {
                        caughtUp = false;
                    }
                }
                if (caughtUp) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    ObjectNode line = Out.obj("recv");
                    line.put("topic", r.topic()).put("partition", r.partition());
                    line.put("offset", r.offset()).put("timestamp", r.timestamp());
                    line.put("timestamp_type", r.timestampType().toString());
                    line.put("key", Out.b64(r.key())).put("value", Out.b64(r.value()));
                    line.set("headers", Out.headers(r.headers()));
                    Out.emit(line);
                }
            }
        }
    }
}
