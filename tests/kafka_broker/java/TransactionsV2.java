// Transactional workloads of the Java client (kafka-clients of the bundle), which uses Transactions V2 when the
// broker finalizes transaction.version 2: commits and aborts, a fenced instance, a coordinator timeout abort and
// offsets sent to a transaction. Prints one JSON document of ledger entries (tests/kafka_broker/ledger.py) and
// the broker's own producer state per partition (DescribeProducers, KIP-664).
// Usage: java TransactionsV2 BOOTSTRAP TOPIC SOURCE_TOPIC PARTITIONS...
import com.fasterxml.jackson.databind.ObjectMapper;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TransactionsV2 {
    static final String CLIENT = "java kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion();
    static String bootstrap;
    static final List<Map<String, Object>> entries = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String topic = args[1];
        String source = args[2];
        transactions(topic);
        zombie(topic);
        timeout(topic);
        offsets(topic, source);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("entries", entries);
        List<TopicPartition> partitions = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            int dash = args[i].lastIndexOf('-');
            partitions.add(new TopicPartition(args[i].substring(0, dash), Integer.parseInt(args[i].substring(dash + 1))));
        }
        out.put("producers", describeProducers(partitions));
        System.out.println(new ObjectMapper().writeValueAsString(out));
    }

    static KafkaProducer<String, String> producer(String transactionalId, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", transactionalId);
        p.put("transaction.timeout.ms", Integer.toString(timeoutMs));
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static Map<String, Object> entry(String workload, String id, String outcome, String how) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("workload", workload);
        e.put("client", CLIENT);
        e.put("transactional_id", id);
        e.put("outcome", outcome);
        e.put("how", how);
        e.put("offsets", new TreeMap<String, List<Long>>());
        entries.add(e);
        return e;
    }

    /** Send `count` records round-robin over `partitions` and record the acknowledged offsets in `e`. */
    @SuppressWarnings("unchecked")
    static void send(KafkaProducer<String, String> producer, Map<String, Object> e, String topic, int[] partitions,
                     int count) throws Exception {
        List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String value = e.get("workload") + ":" + e.get("transactional_id") + ":" + i;
            sent.add(producer.send(new ProducerRecord<>(topic, partitions[i % partitions.length], null, value)));
        }
        producer.flush();
        Map<String, List<Long>> offsets = (Map<String, List<Long>>) e.get("offsets");
        for (java.util.concurrent.Future<RecordMetadata> f : sent) {
            RecordMetadata m = f.get();
            offsets.computeIfAbsent(m.topic() + "-" + m.partition(), k -> new ArrayList<>()).add(m.offset());
        }
        long[] idAndEpoch = producerIdAndEpoch(producer);
        e.put("producer_id", idAndEpoch[0]);
        e.put("producer_epoch", idAndEpoch[1]);
    }

    /** The producer id and epoch the client holds, read from its TransactionManager (no public API has them). */
    static long[] producerIdAndEpoch(KafkaProducer<String, String> producer) throws Exception {
        Field field = KafkaProducer.class.getDeclaredField("transactionManager");
        field.setAccessible(true);
        Object manager = field.get(producer);
        Method method = manager.getClass().getDeclaredMethod("producerIdAndEpoch");
        method.setAccessible(true);
        Object value = method.invoke(manager);
        Field id = value.getClass().getDeclaredField("producerId");
        Field epoch = value.getClass().getDeclaredField("epoch");
        return new long[] {id.getLong(value), epoch.getShort(value)};
    }

    static void run(KafkaProducer<String, String> producer, String workload, String id, String topic, int[] partitions,
                    int count, boolean commit) throws Exception {
        producer.beginTransaction();
        Map<String, Object> e = entry(workload, id, commit ? "COMMITTED" : "ABORTED", commit ? "commit" : "abort");
        send(producer, e, topic, partitions, count);
        if (commit) producer.commitTransaction(); else producer.abortTransaction();
    }

    static void transactions(String topic) throws Exception {
        try (KafkaProducer<String, String> producer = producer("v2-txn", 60000)) {
            for (int i = 0; i < 6; i++) run(producer, "v2-transactions", "v2-txn", topic, new int[] {0, 1, 2}, 30, i % 2 == 0);
        }
    }

    static void zombie(String topic) throws Exception {
        KafkaProducer<String, String> first = producer("v2-zombie", 60000);
        first.beginTransaction();
        Map<String, Object> e = entry("v2-zombie", "v2-zombie", "ABORTED", "fenced");
        send(first, e, topic, new int[] {0, 1}, 10);
        try (KafkaProducer<String, String> second = producer("v2-zombie", 60000)) {
            try {
                first.commitTransaction();
                throw new IllegalStateException("the fenced instance committed");
            } catch (org.apache.kafka.common.KafkaException expected) {
                first.close(Duration.ZERO);
            }
            run(second, "v2-zombie", "v2-zombie", topic, new int[] {0, 1}, 10, true);
        }
    }

    static void timeout(String topic) throws Exception {
        try (KafkaProducer<String, String> producer = producer("v2-timeout", 2000)) {
            producer.beginTransaction();
            Map<String, Object> e = entry("v2-timeout", "v2-timeout", "ABORTED", "timeout");
            send(producer, e, topic, new int[] {1, 2}, 10);
            Thread.sleep(5000);  // past the timeout and the broker's 1 s abort check
            try {
                producer.commitTransaction();
                throw new IllegalStateException("the timed-out transaction committed");
            } catch (org.apache.kafka.common.KafkaException expected) {
                // the client is left in a fatal error state; a new instance carries on
            }
        }
        try (KafkaProducer<String, String> producer = producer("v2-timeout", 60000)) {
            run(producer, "v2-timeout", "v2-timeout", topic, new int[] {1, 2}, 10, true);
        }
    }

    static void offsets(String topic, String source) throws Exception {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", "v2-eos-group");
        c.put("enable.auto.commit", "false");
        c.put("isolation.level", "read_committed");
        c.put("max.poll.records", "20");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        TopicPartition from = new TopicPartition(source, 1);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<String, String> producer = producer("v2-eos", 60000)) {
            consumer.assign(List.of(from));
            consumer.seekToBeginning(List.of(from));
            boolean[] commits = {true, false, true};
            for (boolean commit : commits) {
                long start = consumer.position(from);
                int consumed = 0;
                while (consumed < 20) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofSeconds(5));
                    consumed += records.count();
                }
                producer.beginTransaction();
                Map<String, Object> e = entry("v2-offsets", "v2-eos", commit ? "COMMITTED" : "ABORTED", commit ? "commit" : "abort");
                send(producer, e, topic, new int[] {2}, consumed);
                producer.sendOffsetsToTransaction(Map.of(from, new OffsetAndMetadata(consumer.position(from))), consumer.groupMetadata());
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                    consumer.seek(from, start);
                }
            }
        }
    }

    static List<Map<String, Object>> describeProducers(List<TopicPartition> partitions) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        List<Map<String, Object>> out = new ArrayList<>();
        try (Admin admin = Admin.create(p)) {
            var result = admin.describeProducers(partitions).all().get();
            for (var e : result.entrySet()) {
                for (ProducerState s : e.getValue().activeProducers()) {
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("topic", e.getKey().topic());
                    row.put("partition", e.getKey().partition());
                    row.put("producer_id", s.producerId());
                    row.put("producer_epoch", s.producerEpoch());
                    row.put("last_sequence", s.lastSequence());
                    row.put("coordinator_epoch", s.coordinatorEpoch().orElse(-1));
                    row.put("current_transaction_start_offset", s.currentTransactionStartOffset().orElse(-1));
                    out.add(row);
                }
            }
        }
        return out;
    }
}
