import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Base64;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/** JSON lines on stdout, one object per fact, for the pytest side to check record by record. */
final class Out {
    static final ObjectMapper JSON = new ObjectMapper();

    private Out() {}

    static ObjectNode obj(String kind) {
        ObjectNode node = JSON.createObjectNode();
        node.put("kind", kind);
        return node;
    }

    static synchronized void emit(ObjectNode node) {
        System.out.println(node.toString());
        System.out.flush();
    }

    static String b64(byte[] bytes) {
        return bytes == null ? null : Base64.getEncoder().encodeToString(bytes);
    }

    static ArrayNode headers(Headers headers) {
        ArrayNode array = JSON.createArrayNode();
        for (Header header : headers) {
            ArrayNode pair = array.addArray();
            pair.add(header.key());
            pair.add(b64(header.value()));
        }
        return array;
    }

    static String error(Throwable error) {
        Throwable cause = error;
        while ((cause instanceof java.util.concurrent.ExecutionException
                || cause instanceof java.util.concurrent.CompletionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getName() + ": " + cause.getMessage();
    }
}
