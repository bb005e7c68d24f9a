package dev.hearth.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.auth.oauth2.AccessToken;
import com.google.auth.oauth2.GoogleCredentials;
import com.google.firebase.FirebaseApp;
import com.google.firebase.FirebaseOptions;
import com.google.firebase.database.DataSnapshot;
import com.google.firebase.database.DatabaseError;
import com.google.firebase.database.DatabaseReference;
import com.google.firebase.database.FirebaseDatabase;
import com.google.firebase.database.MutableData;
import com.google.firebase.database.Transaction;
import com.google.firebase.database.ValueEventListener;
import com.google.firebase.database.snapshot.NodeUtilities;
import com.google.firebase.database.util.JsonMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Hearth through the Firebase Admin SDK for Java, whose realtime client is the Android SDK's.
 * That client hashes numbers from their exact IEEE-754 bits, where the JS client (whose hash
 * the server computes first) rounds some of them: 2^53-1, 2^48-1 and 3.9999999999999996 hash
 * differently, 12345 alike. A compare-and-set (transaction) with either form must succeed.
 */
class JavaClientTest {
  private static final long WAIT_S = 20;
  private static final long MAX_SAFE = 9007199254740991L; // 2^53 - 1
  private static final long TWO_48_MINUS_1 = 281474976710655L;
  private static final double BELOW_FOUR = 3.9999999999999996;
  private static final String HASH_OF_12345 = "Dlf4ot4Qej2fpsa9yUMkNSdwbYw=";

  private static Hearth hearth;
  private static final String NS = "java-" + UUID.randomUUID().toString().substring(0, 8);
  /** The client under test, and a second one that writes and reads back with an empty cache. */
  private static FirebaseDatabase client;
  private static FirebaseDatabase other;

  @BeforeAll
  static void start() throws Exception {
    hearth = Hearth.start();
    client = database("client");
    other = database("other");
  }

  @AfterAll
  static void stop() throws Exception {
    for (FirebaseApp app : FirebaseApp.getApps()) {
      app.delete();
    }
    hearth.close();
  }

  private static FirebaseDatabase database(String name) {
    // An http:// database URL with ns= puts the SDK in emulator mode: it authenticates with
    // the token `owner`, which --dev accepts. The credential is never asked for a token.
    FirebaseOptions options = FirebaseOptions.builder()
        .setCredentials(GoogleCredentials.create(
            new AccessToken("owner", new Date(System.currentTimeMillis() + 3_600_000))))
        .setDatabaseUrl(hearth.databaseUrl(NS))
        .setProjectId("demo-hearth")
        .build();
    return FirebaseDatabase.getInstance(FirebaseApp.initializeApp(options, name));
  }

  private static String fresh() {
    return "t/" + UUID.randomUUID();
  }

  private static DataSnapshot read(DatabaseReference ref) throws Exception {
    CompletableFuture<DataSnapshot> done = new CompletableFuture<>();
    ref.addListenerForSingleValueEvent(new ValueEventListener() {
      @Override
      public void onDataChange(DataSnapshot snapshot) {
        done.complete(snapshot);
      }

      @Override
      public void onCancelled(DatabaseError error) {
        done.completeExceptionally(error.toException());
      }
    });
    return done.get(WAIT_S, TimeUnit.SECONDS);
  }

  private static void assertNumber(Object expected, Object actual, String what) {
    assertTrue(actual instanceof Number, what + ": " + actual + " is not a number");
    if (expected instanceof Long) {
      assertEquals(((Long) expected).longValue(), ((Number) actual).longValue(), what);
    }
    assertEquals(((Number) expected).doubleValue(), ((Number) actual).doubleValue(), 0.0, what);
  }

  /** The value plus one, as a long when it is one. */
  private static Object plusOne(Object value) {
    if (value instanceof Long || value instanceof Integer) {
      return ((Number) value).longValue() + 1;
    }
    return ((Number) value).doubleValue() + 1.0;
  }

  /** Runs a transaction on `ref` that `change`s the data it sees, and waits for its end. */
  private static DataSnapshot transact(DatabaseReference ref, java.util.function.Consumer<MutableData> change)
      throws Exception {
    CompletableFuture<DataSnapshot> done = new CompletableFuture<>();
    ref.runTransaction(new Transaction.Handler() {
      @Override
      public Transaction.Result doTransaction(MutableData data) {
        // The first attempt may see no data yet (nothing cached): the server refuses it as
        // stale and the client retries with the data it is sent.
        if (data.getValue() != null) {
          change.accept(data);
        }
        return Transaction.success(data);
      }

      @Override
      public void onComplete(DatabaseError error, boolean committed, DataSnapshot snapshot) {
        if (error != null) {
          done.completeExceptionally(error.toException());
        } else if (!committed) {
          done.completeExceptionally(new AssertionError("not committed"));
        } else {
          done.complete(snapshot);
        }
      }
    }, false);
    return done.get(WAIT_S, TimeUnit.SECONDS);
  }

  private static final Object[] NUMBERS = {MAX_SAFE, TWO_48_MINUS_1, BELOW_FOUR, 12345L};

  @Test
  void setAndGetOfNumbersTheClientsHashDifferently() throws Exception {
    for (Object n : NUMBERS) {
      String path = fresh();
      other.getReference(path).setValueAsync(n).get(WAIT_S, TimeUnit.SECONDS);
      assertNumber(n, read(client.getReference(path)).getValue(), "read of " + n);
    }
  }

  @Test
  void transactionsOnThoseNumbersCommit() throws Exception {
    for (Object n : NUMBERS) {
      String path = fresh();
      other.getReference(path).setValueAsync(n).get(WAIT_S, TimeUnit.SECONDS);
      DataSnapshot result =
          transact(client.getReference(path), data -> data.setValue(plusOne(data.getValue())));
      assertNumber(plusOne(n), result.getValue(), "transaction on " + n);
      assertNumber(plusOne(n), read(other.getReference(path)).getValue(), "after " + n);
    }
  }

  @Test
  void transactionOnARecordHoldingSuchANumber() throws Exception {
    String path = fresh();
    Map<String, Object> record = new HashMap<>();
    record.put("score", MAX_SAFE);
    record.put("name", "ada");
    record.put("deep", Map.of("x", BELOW_FOUR));
    other.getReference(path).setValueAsync(record).get(WAIT_S, TimeUnit.SECONDS);
    transact(client.getReference(path), data -> data.child("wins").setValue(1L));
    DataSnapshot after = read(other.getReference(path));
    assertNumber(1L, after.child("wins").getValue(), "wins");
    assertNumber(MAX_SAFE, after.child("score").getValue(), "score");
    assertNumber(BELOW_FOUR, after.child("deep/x").getValue(), "deep/x");
  }

  @Test
  void transactionOnANodeWithSuchAPriority() throws Exception {
    String path = fresh();
    other.getReference(path).setValueAsync(1L, (double) MAX_SAFE).get(WAIT_S, TimeUnit.SECONDS);
    DataSnapshot seen = read(client.getReference(path));
    assertNumber((double) MAX_SAFE, seen.getPriority(), "priority");
    transact(client.getReference(path), data -> {
      Object priority = data.getPriority();
      data.setValue(plusOne(data.getValue()));
      data.setPriority(priority);
    });
    DataSnapshot after = read(other.getReference(path));
    assertNumber(2L, after.getValue(), "value");
    assertNumber((double) MAX_SAFE, after.getPriority(), "priority after");
  }

  @Test
  void transactionOnKeysTheClientsOrderDifferently() throws Exception {
    // The JS client reads "000000000001" as the integer 1 (any number of leading zeros), the
    // Java client as text (integers have at most 11 characters), so the children of this
    // object are hashed in another order.
    String path = fresh();
    Map<String, Object> record = new HashMap<>();
    record.put("000000000001", "a");
    record.put("5", "b");
    record.put("B", "c");
    other.getReference(path).setValueAsync(record).get(WAIT_S, TimeUnit.SECONDS);
    transact(client.getReference(path), data -> data.child("n").setValue(1L));
    DataSnapshot after = read(other.getReference(path));
    assertEquals("a", after.child("000000000001").getValue());
    assertNumber(1L, after.child("n").getValue(), "n");
  }

  @Test
  void listenerSeesEachValue() throws Exception {
    String path = fresh();
    BlockingQueue<Object> seen = new LinkedBlockingQueue<>();
    ValueEventListener listener = client.getReference(path).addValueEventListener(
        new ValueEventListener() {
          @Override
          public void onDataChange(DataSnapshot snapshot) {
            if (snapshot.exists()) {
              seen.add(snapshot.getValue());
            }
          }

          @Override
          public void onCancelled(DatabaseError error) {
            seen.add(error);
          }
        });
    try {
      for (Object n : NUMBERS) {
        other.getReference(path).setValueAsync(n).get(WAIT_S, TimeUnit.SECONDS);
        assertNumber(n, seen.poll(WAIT_S, TimeUnit.SECONDS), "listener, " + n);
      }
    } finally {
      client.getReference(path).removeEventListener(listener);
    }
  }

  @Test
  void updateWritesEveryPath() throws Exception {
    String path = fresh();
    Map<String, Object> update = new HashMap<>();
    update.put("a", MAX_SAFE);
    update.put("b/c", BELOW_FOUR);
    update.put("d", TWO_48_MINUS_1);
    client.getReference(path).updateChildrenAsync(update).get(WAIT_S, TimeUnit.SECONDS);
    DataSnapshot after = read(other.getReference(path));
    assertNumber(MAX_SAFE, after.child("a").getValue(), "a");
    assertNumber(BELOW_FOUR, after.child("b/c").getValue(), "b/c");
    assertNumber(TWO_48_MINUS_1, after.child("d").getValue(), "d");
    // And a transaction on the updated parent commits too.
    transact(client.getReference(path), data -> data.child("e").setValue(true));
    assertEquals(true, read(other.getReference(path)).child("e").getValue());
  }

  @Test
  void restIfMatchTakesTheJavaClientsHash() throws Exception {
    // The ETag Hearth sends is the JS form; the Java form, computed by the SDK's own hashing
    // of the same data, is accepted as an If-Match too. Any other hash is refused (412).
    String path = fresh();
    HttpClient http = HttpClient.newHttpClient();
    URI uri = URI.create("http://127.0.0.1:" + hearth.port + "/" + path + ".json?ns=" + NS);
    HttpResponse<String> put = http.send(
        HttpRequest.newBuilder(uri).PUT(HttpRequest.BodyPublishers.ofString("{\"s\":" + MAX_SAFE + "}"))
            .build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, put.statusCode(), put.body());
    HttpResponse<String> get = http.send(
        HttpRequest.newBuilder(uri).header("X-Firebase-ETag", "true").GET().build(),
        HttpResponse.BodyHandlers.ofString());
    String etag = get.headers().firstValue("ETag").orElseThrow();
    String javaHash = NodeUtilities.NodeFromJSON(JsonMapper.parseJsonValue(get.body())).getHash();
    assertNotEquals(etag, javaHash);
    HttpResponse<String> stale = http.send(
        HttpRequest.newBuilder(uri).header("If-Match", "\"" + HASH_OF_12345 + "\"")
            .PUT(HttpRequest.BodyPublishers.ofString("1")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(412, stale.statusCode(), stale.body());
    HttpResponse<String> cas = http.send(
        HttpRequest.newBuilder(uri).header("If-Match", "\"" + javaHash + "\"")
            .PUT(HttpRequest.BodyPublishers.ofString("2")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, cas.statusCode(), cas.body());
    assertNumber(2L, read(other.getReference(path)).getValue(), "after If-Match");
  }

  @Test
  void largeIntegersReadBack() throws Exception {
    // Integers past 2^63 are sent as digits by a JS-style printer; the Java client parses
    // integer text with Long.parseLong, so they must reach it in a form it reads.
    List<Object> values = new ArrayList<>(List.of(1e20, 9.3e18, 1e21, (double) Long.MAX_VALUE));
    for (Object n : values) {
      String path = fresh();
      other.getReference(path).setValueAsync(n).get(WAIT_S, TimeUnit.SECONDS);
      assertNumber(n, read(client.getReference(path)).getValue(), "read of " + n);
    }
  }
}
