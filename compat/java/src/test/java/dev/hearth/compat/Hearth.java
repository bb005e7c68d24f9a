package dev.hearth.compat;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * One `hearth serve --dev` process on a free port of 127.0.0.1, with a temporary data
 * directory: the release binary named by HEARTH_BIN, or the repository's target/release/hearth.
 */
final class Hearth implements AutoCloseable {
  private static final long START_TIMEOUT_MS = 15_000;

  final int port;
  private final Process process;
  private final Path dataDir;

  private Hearth(int port, Process process, Path dataDir) {
    this.port = port;
    this.process = process;
    this.dataDir = dataDir;
  }

  static Path binary() {
    String fromEnv = System.getenv("HEARTH_BIN");
    Path bin = fromEnv != null && !fromEnv.isEmpty()
        ? Paths.get(fromEnv)
        : Paths.get(System.getProperty("user.dir"), "..", "..", "target", "release", "hearth");
    if (!Files.isExecutable(bin)) {
      throw new IllegalStateException("no hearth binary at " + bin
          + ": build it (cargo build --release -p hearth) or set HEARTH_BIN");
    }
    return bin.toAbsolutePath().normalize();
  }

  static Hearth start() throws Exception {
    int port;
    try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = probe.getLocalPort();
    }
    Path dataDir = Files.createTempDirectory("hearth-java-");
    File log = dataDir.resolveSibling(dataDir.getFileName() + ".log").toFile();
    Process process = new ProcessBuilder(List.of(
            binary().toString(), "serve", "--dev",
            "--listen", "127.0.0.1:" + port,
            "--data-dir", dataDir.toString(),
            "--durability", "none",
            "--threads", "2"))
        .redirectErrorStream(true)
        .redirectOutput(log)
        .start();
    long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
    while (true) {
      if (!process.isAlive()) {
        throw new IllegalStateException("hearth exited at start (" + process.exitValue()
            + "): " + Files.readString(log.toPath()));
      }
      try (Socket socket = new Socket()) {
        socket.connect(new InetSocketAddress("127.0.0.1", port), 500);
        break;
      } catch (IOException notYet) {
        if (System.currentTimeMillis() > deadline) {
          process.destroyForcibly();
          throw new IllegalStateException("hearth did not listen on " + port);
        }
        Thread.sleep(50);
      }
    }
    return new Hearth(port, process, dataDir);
  }

  String databaseUrl(String ns) {
    return "http://127.0.0.1:" + port + "?ns=" + ns;
  }

  @Override
  public void close() throws Exception {
    process.destroy();
    process.waitFor();
    try (Stream<Path> paths = Files.walk(dataDir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
