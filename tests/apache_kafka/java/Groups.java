import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Two Java consumers in one group, for each protocol given (classic, consumer = KIP-848): both
 * subscribe to an empty topic of PARTITIONS partitions; once the partitions are split between
 * them, COUNT records are produced (record i to partition i % PARTITIONS); each consumer reads
 * its partitions and commits. Prints the assignments, every record read ("recv" with the
 * member), the group as AdminClient describes it while both are members, and the committed
 * offsets.
 *
 * Usage: Groups BOOTSTRAP PREFIX PARTITIONS COUNT PROTOCOL...
 */
public final class Groups {
    static final class Member implements Runnable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final Set<TopicPartition> assignment = ConcurrentHashMap.newKeySet();
        final List<ConsumerRecord<String, String>> records = new CopyOnWriteArrayList<>();
        final AtomicBoolean commitNow = new AtomicBoolean(false);
        final AtomicBoolean committed = new AtomicBoolean(false);
        final AtomicBoolean stop = new AtomicBoolean(false);
        volatile String failure;

        Member(String name, Properties props) {
            this.name = name;
            this.consumer = new KafkaConsumer<>(props);
        }

        @Override
        public void run() {
            try {
                while (!stop.get()) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                        records.add(r);
                    }
                    if (commitNow.get() && !committed.get()) {
                        consumer.commitSync();
                        committed.set(true);
                    }
                }
            } catch (Exception error) {
                failure = Out.error(error);
            } finally {
                consumer.close();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int partitions = Integer.parseInt(args[2]);
        int count = Integer.parseInt(args[3]);
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            for (int i = 4; i < args.length; i++) {
                run(admin, bootstrap, prefix + "-" + args[i], args[i], partitions, count);
            }
        }
        Out.emit(Out.obj("done"));
    }

    static void run(Admin admin, String bootstrap, String name, String protocol, int partitions,
            int count) throws Exception {
        String topic = name;
        String group = name + "-group";
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        List<Member> members = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int m = 0; m < 2; m++) {
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            props.put(ConsumerConfig.CLIENT_ID_CONFIG, name + "-member-" + m);
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
            if (protocol.equals("classic")) {
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            }
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            Member member = new Member("member-" + m, props);
            member.consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    member.assignment.removeAll(revoked);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                    member.assignment.addAll(assigned);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> lost) {
                    member.assignment.removeAll(lost);
                }
            });
            members.add(member);
            Thread thread = new Thread(member, name + "-member-" + m);
            threads.add(thread);
            thread.start();
        }
        ObjectNode status = Out.obj("split");
        status.put("protocol", protocol);
        long deadline = System.currentTimeMillis() + 60_000;
        while (!split(members, partitions) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        status.put("split", split(members, partitions));
        status.put("after_ms", 60_000 - (deadline - System.currentTimeMillis()));
        Out.emit(status);

        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, "v" + i));
            }
        }
        deadline = System.currentTimeMillis() + 60_000;
        while (total(members) < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(500);  // anything beyond COUNT (a duplicate) would show now
        for (Member member : members) {
            member.commitNow.set(true);
        }
        deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline
                && !(members.get(0).committed.get() && members.get(1).committed.get())) {
            Thread.sleep(50);
        }
        for (Member member : members) {
            ObjectNode line = Out.obj("member");
            line.put("protocol", protocol).put("member", member.name);
            line.put("committed", member.committed.get()).put("failure", member.failure);
            ArrayNode assigned = line.putArray("assignment");
            member.assignment.stream().map(TopicPartition::partition).sorted()
                .forEach(assigned::add);
            Out.emit(line);
            for (ConsumerRecord<String, String> r : member.records) {
                ObjectNode rec = Out.obj("recv");
                rec.put("protocol", protocol).put("member", member.name);
                rec.put("partition", r.partition()).put("offset", r.offset());
                rec.put("key", r.key()).put("value", r.value());
                Out.emit(rec);
            }
        }
        // While both are still members: the group as the AdminClient sees it.
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get()
            .get(group);
        ObjectNode described = Out.obj("describe");
        described.put("protocol", protocol).put("state", d.groupState().toString());
        described.put("type", d.type().toString());
        described.put("assignor", d.partitionAssignor());
        ArrayNode memberList = described.putArray("members");
        for (MemberDescription md : d.members()) {
            ObjectNode mo = memberList.addObject();
            mo.put("client_id", md.clientId());
            ArrayNode parts = mo.putArray("partitions");
            md.assignment().topicPartitions().stream().map(TopicPartition::partition).sorted()
                .forEach(parts::add);
        }
        Out.emit(described);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        ObjectNode committed = Out.obj("committed");
        committed.put("protocol", protocol).put("group", group);
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            committed.put(Integer.toString(e.getKey().partition()), e.getValue().offset());
        }
        Out.emit(committed);
        for (Member member : members) {
            member.stop.set(true);
        }
        for (Thread thread : threads) {
            thread.join(30_000);
        }
    }

    static boolean split(List<Member> members, int partitions) {
        Set<TopicPartition> a = Set.copyOf(members.get(0).assignment);
        Set<TopicPartition> b = Set.copyOf(members.get(1).assignment);
        if (a.isEmpty() || b.isEmpty()) {
            return false;
        }
        Set<TopicPartition> union = new java.util.HashSet<>(a);
        union.addAll(b);
        return union.size() == a.size() + b.size() && union.size() == partitions;
    }

    static int total(List<Member> members) {
        return members.get(0).records.size() + members.get(1).records.size();
    }
}
