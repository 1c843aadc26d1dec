package htam;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.server.CommunityBootstrapper;
import org.neo4j.server.NeoBootstrapper;

/**
 * Runs the Neo4j Community server (Bolt, HTTP, Browser) in this JVM with auth enabled.
 *
 * <p>Usage: {@code Launcher --home DIR [--bolt-port 7687] [--http-port 7474]}, with the password
 * in HTAM_NEO4J_PASSWORD (never on the command line, where `ps` shows it). Data lives in
 * DIR/data and survives restarts. The password is set once, on the server's first start (while
 * Neo4j's initial password still has to be changed); an existing password is never changed, so
 * a start with another password cannot lock its owner out: the client then finds the password
 * rejected and says so. Prints {@code READY bolt://127.0.0.1:PORT} once the server answers;
 * SIGTERM stops the server through Neo4j's own shutdown hook.
 */
public final class Launcher {

    private Launcher() {}

    public static void main(String[] argv) {
        Map<String, String> args = parse(argv);
        String home = require(args, "--home");
        String password = System.getenv("HTAM_NEO4J_PASSWORD");
        if (password == null || password.isEmpty()) {
            System.err.println("FAILED HTAM_NEO4J_PASSWORD is not set");
            System.exit(2);
        }
        String boltPort = args.getOrDefault("--bolt-port", "7687");
        String httpPort = args.getOrDefault("--http-port", "7474");

        NeoBootstrapper server = new CommunityBootstrapper();
        int code = server.start(Path.of(home), settings(boltPort, httpPort));
        if (code != NeoBootstrapper.OK) {
            System.err.println("FAILED neo4j exited with code " + code + "; see " + home + "/logs");
            System.exit(code);
        }
        try {
            setInitialPassword(server.getDatabaseManagementService(), password);
        } catch (RuntimeException e) {
            // Neo4j's threads would keep a half-configured server alive: exit, which stops it.
            System.err.println("FAILED could not set the initial password: " + e.getMessage());
            System.exit(1);
        }
        System.out.println("READY bolt://127.0.0.1:" + boltPort);
        System.out.flush();
        // Neo4j's non-daemon threads keep the JVM alive; its shutdown hook handles SIGTERM.
    }

    private static Map<String, String> settings(String boltPort, String httpPort) {
        Map<String, String> s = new HashMap<>();
        s.put("server.default_listen_address", "127.0.0.1");
        s.put("server.bolt.listen_address", "127.0.0.1:" + boltPort);
        // What the HTTP root tells clients (Neo4j Browser's connect form): otherwise port 7687.
        s.put("server.bolt.advertised_address", ":" + boltPort);
        s.put("server.http.listen_address", "127.0.0.1:" + httpPort);
        s.put("server.https.enabled", "false");
        s.put("dbms.security.auth_enabled", "true");
        // These machines are offline; the usage reporter would only wait on the network.
        s.put("dbms.usage_report.enabled", "false");
        // Neo4j Browser does not ask its user to send usage data.
        s.put("client.allow_telemetry", "false");
        // The HTG's Browser guide, style and saved queries (docker/browser) at /htam/, open without
        // a login like the Browser itself; the guide plays when the Browser connects.
        s.put("server.unmanaged_extension_classes", "htam.browser=/htam");
        s.put("dbms.security.http_auth_allowlist", "/,/browser.*,/htam/.*");
        s.put("browser.post_connect_cmd", "play http://localhost:" + httpPort + "/htam/guide.html");
        // The heap is capped by the JVM flags; keep the page cache small to match.
        s.put("server.memory.pagecache.size", "256m");
        // Bolt otherwise idles 2 x 5 s on shutdown, after the stores are already closed
        // (debug.log then warns that the wait was cut short: harmless).
        s.put("internal.server.bolt.connection_shutdown_wait_time", "1s");
        s.put("internal.server.bolt.thread_pool_shutdown_wait_time", "1s");
        return s;
    }

    /**
     * Sets the password of a server that still has Neo4j's initial one (a password change is
     * required only until someone sets it: on the first start, or after a first start that was
     * killed before this ran). A password that was set is never touched.
     */
    private static void setInitialPassword(DatabaseManagementService dbms, String password) {
        var system = dbms.database("system");
        boolean initial = system.executeTransactionally(
                "SHOW USERS YIELD user, passwordChangeRequired WHERE user = 'neo4j' RETURN passwordChangeRequired",
                Map.of(),
                result -> result.hasNext() && Boolean.TRUE.equals(result.next().get("passwordChangeRequired")));
        if (initial) {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $p CHANGE NOT REQUIRED", Map.of("p", password));
        }
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i], argv[i + 1]);
        }
        return args;
    }

    private static String require(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            System.err.println("FAILED missing " + name + " (usage: --home DIR [--bolt-port 7687]"
                    + " [--http-port 7474], the password in HTAM_NEO4J_PASSWORD)");
            System.exit(2);
        }
        return value;
    }
}
