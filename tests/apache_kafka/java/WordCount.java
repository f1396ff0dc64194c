import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * Kafka Streams word count, at-least-once: the lines on stdin go to INPUT (two partitions),
 * the application counts words (lower case, split on non-word characters, Unicode-aware as Python's re; a repartition topic
 * and a changelog topic, both created by Streams) into OUTPUT. With the record cache off every
 * input word yields one output record, so the program reads OUTPUT until it holds EXPECTED
 * records (or a minute passes, then a second more), and prints each ("out": partition, offset,
 * word, count) and the application's final state.
 *
 * Usage: WordCount BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR EXPECTED [GUARANTEE] < lines
 * (GUARANTEE: at_least_once, the default, or exactly_once_v2; the checking consumer then
 * reads with isolation.level=read_committed)
 */
public final class WordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
        int expected = Integer.parseInt(args[5]);
        String guarantee = args.length > 6 ? args[6] : StreamsConfig.AT_LEAST_ONCE;
        List<String> lines = new ArrayList<>();
        try (BufferedReader reader =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = reader.readLine(); line != null; line = reader.readLine()) {
                lines.add(line);
            }
        }
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(input, 2, (short) 1),
                new NewTopic(output, 2, (short) 1))).all().get();
        }
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            for (int i = 0; i < lines.size(); i++) {
                producer.send(new ProducerRecord<>(input, i % 2, null, lines.get(i)));
            }
        }

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> text = builder.stream(input);
        text.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("(?U)\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        List<ConsumerRecord<String, Long>> out = new ArrayList<>();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        ObjectNode failure = Out.obj("streams_error");
        streams.setUncaughtExceptionHandler(error -> {
            failure.put("error", Out.error(error));
            Out.emit(failure);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        if (!guarantee.equals(StreamsConfig.AT_LEAST_ONCE)) {
            consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        }
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(consumerProps)) {
            consumer.assign(List.of(new org.apache.kafka.common.TopicPartition(output, 0),
                new org.apache.kafka.common.TopicPartition(output, 1)));
            long deadline = System.currentTimeMillis() + 90_000;
            while (out.size() < expected && System.currentTimeMillis() < deadline
                    && streams.state() != KafkaStreams.State.ERROR
                    && streams.state() != KafkaStreams.State.NOT_RUNNING) {
                consumer.poll(Duration.ofMillis(200)).forEach(out::add);
            }
            long extra = System.currentTimeMillis() + 1000;  // a duplicate would show now
            while (System.currentTimeMillis() < extra) {
                consumer.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        ObjectNode state = Out.obj("state");
        state.put("state", streams.state().toString());
        streams.close(Duration.ofSeconds(30));
        state.put("closed", streams.state().toString());
        for (ConsumerRecord<String, Long> r : out) {
            ObjectNode line = Out.obj("out");
            line.put("partition", r.partition()).put("offset", r.offset());
            line.put("word", r.key()).put("count", r.value());
            Out.emit(line);
        }
        Out.emit(state);
        Out.emit(Out.obj("done"));
    }
}
