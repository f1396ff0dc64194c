import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's KafkaShareConsumer against the broker: args BOOTSTRAP GROUP TOPIC COUNT. Creates the
 * topic (2 partitions), sets share.auto.offset.reset=earliest on the group, produces COUNT
 * records, then three share consumers (threads, implicit acknowledgement) read until COUNT
 * records were received in total; describes the group with the Admin client. JSON lines:
 * {"kind":"record", consumer, partition, offset, delivery}, {"kind":"group", members, state},
 * {"kind":"done"}.
 */
public final class Share {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int count = Integer.parseInt(args[3]);
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"),
                AlterConfigOp.OpType.SET)))).all().get();
            Properties producerProps = new Properties();
            producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, i % 2, null, "v" + i));
                }
                producer.flush();
            }
            AtomicInteger received = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            List<KafkaShareConsumer<String, String>> consumers = new ArrayList<>();
            for (int c = 0; c < 3; c++) {
                Properties props = new Properties();
                props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);
                props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
                props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
                KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
                consumer.subscribe(List.of(topic));
                consumers.add(consumer);
                final int id = c;
                Thread thread = new Thread(() -> {
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (received.get() < count && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> record :
                                consumer.poll(Duration.ofMillis(200))) {
                            ObjectNode line = Out.obj("record");
                            line.put("consumer", id);
                            line.put("partition", record.partition());
                            line.put("offset", record.offset());
                            line.put("delivery", record.deliveryCount().orElse((short) -1));
                            Out.emit(line);
                            received.incrementAndGet();
                        }
                    }
                    consumer.commitSync();
                });
                threads.add(thread);
                thread.start();
            }
            for (Thread thread : threads) {
                thread.join();
            }
            ShareGroupDescription description =
                admin.describeShareGroups(List.of(group)).all().get().get(group);
            ObjectNode line = Out.obj("group");
            line.put("members", description.members().size());
            line.put("state", description.groupState().toString());
            Out.emit(line);
            for (KafkaShareConsumer<String, String> consumer : consumers) {
                consumer.close();
            }
        }
        Out.emit(Out.obj("done"));
    }
}
