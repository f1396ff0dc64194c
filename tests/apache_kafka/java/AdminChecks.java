import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java AdminClient, one step per JSON line: {"kind": "step", "step": NAME, "ok": bool,
 * "error": ..., facts...}. A failing step is reported and the next ones still run.
 *
 * Usage: AdminChecks BOOTSTRAP PREFIX
 */
public final class AdminChecks {
    interface Step {
        void run(ObjectNode out) throws Exception;
    }

    static void step(String name, Step body) {
        ObjectNode out = Out.obj("step");
        out.put("step", name);
        try {
            body.run(out);
            out.put("ok", true);
        } catch (Exception error) {
            out.put("ok", false).put("error", Out.error(error));
        }
        Out.emit(out);
    }

    static final long BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String topicA = prefix + "-a";
        String topicB = prefix + "-b";
        String group = prefix + "-group";
        TopicPartition a0 = new TopicPartition(topicA, 0);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            step("describe_cluster", out -> {
                DescribeClusterResult cluster = admin.describeCluster();
                out.put("cluster_id", cluster.clusterId().get());
                Node controller = cluster.controller().get();
                out.put("controller", controller == null ? -1 : controller.id());
                ArrayNode nodes = out.putArray("nodes");
                for (Node node : cluster.nodes().get()) {
                    nodes.addObject().put("id", node.id()).put("host", node.host())
                        .put("port", node.port());
                }
            });
            step("create_topics", out -> {
                NewTopic a = new NewTopic(topicA, 3, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
                NewTopic b = new NewTopic(topicB, 1, (short) 1)
                    .configs(Map.of("cleanup.policy", "compact"));
                var result = admin.createTopics(List.of(a, b));
                result.all().get();
                out.put("a_partitions", result.numPartitions(topicA).get());
                out.put("a_topic_id", result.topicId(topicA).get().toString());
            });
            step("create_existing_topic", out -> {
                try {
                    admin.createTopics(List.of(new NewTopic(topicA, 3, (short) 1))).all().get();
                    out.put("raised", "nothing");
                } catch (Exception error) {
                    out.put("raised", Out.error(error));
                }
            });
            step("list_topics", out -> {
                ArrayNode names = out.putArray("names");
                for (String name : new TreeSet<>(admin.listTopics().names().get())) {
                    names.add(name);
                }
            });
            step("describe_topics", out -> describe(admin, out, List.of(topicA, topicB)));
            ConfigResource resourceA = new ConfigResource(ConfigResource.Type.TOPIC, topicA);
            ConfigResource resourceB = new ConfigResource(ConfigResource.Type.TOPIC, topicB);
            step("describe_configs", out -> configs(admin, out, List.of(resourceA, resourceB)));
            step("alter_configs", out -> {
                admin.incrementalAlterConfigs(Map.of(resourceA, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"),
                        AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"),
                        AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""),
                        AlterConfigOp.OpType.DELETE)))).all().get();
                configs(admin, out, List.of(resourceA));
            });
            step("describe_broker_config", out -> {
                String brokerId = Integer.toString(admin.describeCluster().nodes().get()
                    .iterator().next().id());
                ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, brokerId);
                Config config = admin.describeConfigs(List.of(broker)).all().get().get(broker);
                ConfigEntry entry = config.get("num.partitions");
                out.put("num.partitions", entry == null ? null : entry.value());
                out.put("entries", config.entries().size());
            });
            step("create_partitions", out -> {
                admin.createPartitions(Map.of(topicA, NewPartitions.increaseTo(5))).all().get();
                describe(admin, out, List.of(topicA));
            });
            step("produce", out -> {
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                    for (int i = 0; i < 10; i++) {
                        producer.send(new ProducerRecord<>(topicA, 0, BASE_TS + i * 1000, "k" + i,
                            "v" + i)).get();
                    }
                }
            });
            step("list_offsets", out -> offsets(admin, out, a0));
            step("delete_records", out -> {
                var result = admin.deleteRecords(Map.of(a0, RecordsToDelete.beforeOffset(4)));
                out.put("low_watermark", result.lowWatermarks().get(a0).get().lowWatermark());
                offsets(admin, out, a0);
            });
            step("commit_group_offsets", out -> {
                Properties c = new Properties();
                c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                    consumer.assign(List.of(a0));
                    consumer.commitSync(Map.of(a0, new OffsetAndMetadata(7, "seven")));
                    OffsetAndMetadata committed = consumer.committed(Set.of(a0)).get(a0);
                    out.put("committed", committed.offset()).put("metadata", committed.metadata());
                }
            });
            step("list_groups", out -> {
                ArrayNode groups = out.putArray("groups");
                for (GroupListing listing : admin.listGroups().all().get()) {
                    groups.addObject().put("group", listing.groupId())
                        .put("type", String.valueOf(listing.type().orElse(null)))
                        .put("protocol", listing.protocol())
                        .put("state", String.valueOf(listing.groupState().orElse(null)));
                }
            });
            step("describe_group", out -> {
                ConsumerGroupDescription d =
                    admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                out.put("state", d.groupState().toString()).put("members", d.members().size());
                out.put("type", d.type().toString());
                out.put("coordinator", d.coordinator().id());
            });
            step("list_group_offsets", out -> groupOffsets(admin, out, group));
            step("alter_group_offsets", out -> {
                admin.alterConsumerGroupOffsets(group, Map.of(a0, new OffsetAndMetadata(2)))
                    .all().get();
                groupOffsets(admin, out, group);
            });
            step("delete_group_offsets", out -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(a0)).all().get();
                groupOffsets(admin, out, group);
            });
            step("delete_group", out -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                ArrayNode groups = out.putArray("groups");
                for (GroupListing listing : admin.listGroups().all().get()) {
                    groups.add(listing.groupId());
                }
            });
            step("delete_topics", out -> {
                admin.deleteTopics(List.of(topicA, topicB)).all().get();
                long deadline = System.currentTimeMillis() + 20_000;
                Set<String> names = admin.listTopics().names().get();
                while ((names.contains(topicA) || names.contains(topicB))
                        && System.currentTimeMillis() < deadline) {
                    TimeUnit.MILLISECONDS.sleep(200);
                    names = admin.listTopics().names().get();
                }
                out.put("a_listed", names.contains(topicA)).put("b_listed", names.contains(topicB));
            });
            step("describe_deleted_topic", out -> {
                try {
                    admin.describeTopics(List.of(topicA)).allTopicNames().get();
                    out.put("raised", "nothing");
                } catch (Exception error) {
                    out.put("raised", Out.error(error));
                }
            });
        }
        Out.emit(Out.obj("done"));
    }

    static void describe(Admin admin, ObjectNode out, Collection<String> topics) throws Exception {
        ObjectNode all = out.putObject("topics");
        for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
            ObjectNode topic = all.putObject(d.name());
            topic.put("internal", d.isInternal()).put("topic_id", d.topicId().toString());
            ArrayNode partitions = topic.putArray("partitions");
            for (TopicPartitionInfo info : d.partitions()) {
                ObjectNode p = partitions.addObject();
                p.put("partition", info.partition());
                p.put("leader", info.leader() == null ? -1 : info.leader().id());
                ArrayNode replicas = p.putArray("replicas");
                info.replicas().forEach(n -> replicas.add(n.id()));
                ArrayNode isr = p.putArray("isr");
                info.isr().forEach(n -> isr.add(n.id()));
            }
        }
    }

    static void configs(Admin admin, ObjectNode out, Collection<ConfigResource> resources)
            throws Exception {
        ObjectNode all = out.putObject("configs");
        for (Map.Entry<ConfigResource, Config> e : admin.describeConfigs(resources).all().get()
                .entrySet()) {
            ObjectNode topic = all.putObject(e.getKey().name());
            for (ConfigEntry entry : e.getValue().entries()) {
                topic.putObject(entry.name()).put("value", entry.value())
                    .put("source", entry.source().toString())
                    .put("default", entry.isDefault());
            }
        }
    }

    static void offsets(Admin admin, ObjectNode out, TopicPartition tp) throws Exception {
        Map<String, OffsetSpec> specs = Map.of(
            "earliest", OffsetSpec.earliest(),
            "latest", OffsetSpec.latest(),
            "max_timestamp", OffsetSpec.maxTimestamp(),
            "for_timestamp", OffsetSpec.forTimestamp(BASE_TS + 5500),
            "for_future_timestamp", OffsetSpec.forTimestamp(BASE_TS + 100_000));
        ObjectNode result = out.putObject("offsets");
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info =
                admin.listOffsets(Map.of(tp, spec.getValue())).partitionResult(tp).get();
            result.putObject(spec.getKey()).put("offset", info.offset())
                .put("timestamp", info.timestamp());
        }
    }

    static void groupOffsets(Admin admin, ObjectNode out, String group) throws Exception {
        ObjectNode result = out.putObject("offsets");
        Map<TopicPartition, OffsetAndMetadata> offsets =
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            result.put(e.getKey().toString(), e.getValue() == null ? -1 : e.getValue().offset());
        }
    }
}
