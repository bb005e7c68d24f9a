// Starts `hearth emulator` with the arguments firebase-tools gives its database emulator.
//
// firebase-tools runs the database emulator as `java -jar PATH ARGS`, PATH being
// DATABASE_EMULATOR_BINARY_PATH when that is set. Pointed at this launcher's jar, it runs
// Hearth in the emulator's place: the `hearth` binary named by HEARTH_BIN, else the one beside
// the jar. The launcher only waits: Hearth takes the emulator's arguments itself
// (`hearth emulator --help`), and a stop of the launcher (firebase-tools sends SIGINT) stops
// Hearth before the launcher exits. Built by scripts/emulator-jar.

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public final class HearthDatabaseEmulator {
    private HearthDatabaseEmulator() {}

    public static void main(String[] args) throws Exception {
        String binary = System.getenv("HEARTH_BIN");
        if (binary == null || binary.isEmpty()) {
            File jar = new File(HearthDatabaseEmulator.class.getProtectionDomain()
                    .getCodeSource().getLocation().toURI());
            binary = new File(jar.getParentFile(), "hearth").getPath();
        }
        List<String> command = new ArrayList<>();
        command.add(binary);
        command.add("emulator");
        command.addAll(Arrays.asList(args));
        Process hearth = new ProcessBuilder(command).inheritIO().start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // SIGTERM: Hearth stops as `hearth serve` does, then the launcher exits.
            hearth.destroy();
            try {
                hearth.waitFor();
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
        }));
        System.exit(hearth.waitFor());
    }
}
