// kce verify's `via: api` reassignments and cancellations: one AlterPartitionReassignments
// request (KIP-455) through Kafka's Admin client, as sent by an operator's own program.
// Arguments: the bootstrap servers, then one `topic:partition=r1,r2,...` per partition to move,
// or `topic:partition=` to cancel its reassignment. Exit 1 (each error on stderr) when the
// controller refused a partition.
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

public class AlterPartitionReassignments {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    Map<TopicPartition, Optional<NewPartitionReassignment>> request = new LinkedHashMap<>();
    for (int i = 1; i < args.length; i++) {
      String[] entry = args[i].split("=", -1);
      int colon = entry[0].lastIndexOf(':');
      TopicPartition tp = new TopicPartition(
          entry[0].substring(0, colon), Integer.parseInt(entry[0].substring(colon + 1)));
      if (entry[1].isEmpty()) {
        request.put(tp, Optional.empty());
        continue;
      }
      List<Integer> replicas = new ArrayList<>();
      for (String broker : entry[1].split(",")) {
        replicas.add(Integer.parseInt(broker));
      }
      request.put(tp, Optional.of(new NewPartitionReassignment(replicas)));
    }
    int refused = 0;
    try (Admin admin = Admin.create(props)) {
      for (Map.Entry<TopicPartition, KafkaFuture<Void>> result :
          admin.alterPartitionReassignments(request).values().entrySet()) {
        try {
          result.getValue().get();
        } catch (ExecutionException error) {
          refused++;
          Throwable cause = error.getCause();
          System.err.println(
              result.getKey() + ": " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
      }
    }
    System.exit(refused == 0 ? 0 : 1);
  }
}
