import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java producer's transactions (kafka-clients 4.3.1): a committed, an aborted and a
 * committed transaction with sendOffsetsToTransaction, then a zombie fenced by a new instance;
 * read back with read_committed and read_uncommitted consumers. JSON lines: "recv" (isolation,
 * value), "fenced", "committed_offset", "done".
 *
 * Usage: Transactions BOOTSTRAP TOPIC
 */
public final class Transactions {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        String group = topic + "-group";
        try (KafkaProducer<String, String> producer = producer(bootstrap, topic + "-tx")) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "committed-" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "aborted"));
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "committed-last"));
            try (KafkaConsumer<String, String> member = consumer(bootstrap, "read_committed", group)) {
                producer.sendOffsetsToTransaction(
                    Map.of(tp, new OffsetAndMetadata(3)), member.groupMetadata());
            }
            producer.commitTransaction();
        }
        KafkaProducer<String, String> zombie = producer(bootstrap, topic + "-zombie");
        zombie.initTransactions();
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>(topic, 0, null, "zombie"));
        zombie.flush();
        try (KafkaProducer<String, String> successor = producer(bootstrap, topic + "-zombie")) {
            successor.initTransactions();
            successor.beginTransaction();
            successor.send(new ProducerRecord<>(topic, 0, null, "successor"));
            successor.commitTransaction();
        }
        try {
            zombie.commitTransaction();
        } catch (ProducerFencedException fenced) {
            Out.emit(Out.obj("fenced"));
        } catch (org.apache.kafka.common.KafkaException other) {
            Out.emit(Out.obj("fenced").put("other", other.getClass().getName()));
        }
        zombie.close(Duration.ofSeconds(5));
        for (String isolation : new String[] {"read_committed", "read_uncommitted"}) {
            try (KafkaConsumer<String, String> reader = consumer(bootstrap, isolation, null)) {
                reader.assign(Collections.singletonList(tp));
                reader.seekToBeginning(Collections.singletonList(tp));
                List<String> values = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (!values.contains("successor") && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> record : reader.poll(Duration.ofMillis(500))) {
                        values.add(record.value());
                        Out.emit(Out.obj("recv").put("isolation", isolation).put("value", record.value()));
                    }
                }
            }
        }
        try (KafkaConsumer<String, String> member = consumer(bootstrap, "read_committed", group)) {
            OffsetAndMetadata committed = member.committed(Collections.singleton(tp)).get(tp);
            Out.emit(Out.obj("committed_offset").put("offset", committed == null ? -1 : committed.offset()));
        }
        Out.emit(Out.obj("done"));
    }

    static KafkaProducer<String, String> producer(String bootstrap, String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(props);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String isolation, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }
}
