// Runs AWS's DynamoDB Local bound to 127.0.0.1 only (it otherwise listens on every interface).
//
// Launched as a single-file source program, with DynamoDBLocal.jar and DynamoDBLocal_lib/* on the class path:
//   java -Djava.library.path=<lib> -cp "<jar>:<lib>/*" LoopbackDynamoDBLocal.java -inMemory -port 0 ...
// The arguments are DynamoDB Local's own. With "-port 0" the kernel picks a free port; the line
// "READY <port>" on stdout says the server accepts connections and on which port. (DynamoDB Local's own
// argument check rejects port 0, so it is given a placeholder and the connector is set to port 0 directly.)
// With -Dawsworld.watchStdin=true the process exits when its stdin reaches end of file, so it never outlives a
// parent that holds the other end of a pipe, even one that is killed without a chance to stop it.
//
// DynamoDB Local checks no credentials, and binding 127.0.0.1 does not keep out a web page open on this machine:
// through DNS rebinding (a request saying "Host: evil.example:PORT") a page read and wrote the table, and
// DynamoDB Local's CORS ("-cors *" by default) answers every site. So a handler around DynamoDB Local's own
// (LoopbackOnly, no extra hop) answers 403 unless the request is addressed to a loopback name and carries no
// browser Origin of another site: the rule of src/awsworld/_http/loopback.py (from_this_machine), whose names
// come from -Dawsworld.loopbackHosts (comma-separated) and -Dawsworld.loopbackSuffix, and the 403's body from
// -Dawsworld.refusal, which src/awsworld/local/dynamodb_local.py sets from that module. Without them the launcher
// refuses to start.

import java.lang.reflect.Field;
import java.net.URI;
import java.util.Locale;
import java.util.Set;

import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.Callback;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        LoopbackOnly.Rule rule = LoopbackOnly.Rule.fromProperties();
        boolean anyPort = false;
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equalsIgnoreCase("-port") && args[i + 1].equals("0")) {
                args[i + 1] = "8000";
                anyPort = true;
            }
        }
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        server.setHandler(new LoopbackOnly(rule, server.getHandler()));
        for (Connector connector : server.getConnectors()) {
            if (connector instanceof ServerConnector) {
                ServerConnector serverConnector = (ServerConnector) connector;
                serverConnector.setHost("127.0.0.1");
                if (anyPort) {
                    serverConnector.setPort(0);
                }
            }
        }
        proxy.start();
        int port = -1;
        for (Connector connector : server.getConnectors()) {
            if (connector instanceof ServerConnector) {
                port = ((ServerConnector) connector).getLocalPort();
            }
        }
        System.out.println("READY " + port);
        System.out.flush();
        if (Boolean.getBoolean("awsworld.watchStdin")) {
            watchStdin();
        }
        proxy.join();
    }

    private static void watchStdin() {
        Thread watchdog = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    // ignore input; only end of file matters
                }
            } catch (java.io.IOException ignored) {
                // a broken stdin means the parent is gone too
            }
            Runtime.getRuntime().halt(0);
        }, "stdin-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    /** A 403 for a request the rule refuses, before DynamoDB Local reads it. */
    static final class LoopbackOnly extends Handler.Wrapper {
        private final Rule rule;

        LoopbackOnly(Rule rule, Handler handler) {
            super(handler);
            this.rule = rule;
        }

        @Override
        public boolean handle(Request request, Response response, Callback callback) throws Exception {
            HttpFields headers = request.getHeaders();
            if (rule.fromThisMachine(headers.get(HttpHeader.HOST), headers.get(HttpHeader.ORIGIN))) {
                return super.handle(request, response, callback);
            }
            response.setStatus(403);
            response.getHeaders().put(HttpHeader.CONTENT_TYPE, "text/plain;charset=utf-8");
            Content.Sink.write(response, true, rule.refusal, callback);
            return true;
        }

        /** from_this_machine of src/awsworld/_http/loopback.py over the names it gives. */
        static final class Rule {
            final Set<String> hosts;
            final String suffix;
            final String refusal;

            Rule(Set<String> hosts, String suffix, String refusal) {
                this.hosts = hosts;
                this.suffix = suffix;
                this.refusal = refusal;
            }

            static Rule fromProperties() {
                String hosts = System.getProperty("awsworld.loopbackHosts");
                String suffix = System.getProperty("awsworld.loopbackSuffix");
                String refusal = System.getProperty("awsworld.refusal");
                if (hosts == null || hosts.isEmpty() || suffix == null || suffix.isEmpty() || refusal == null) {
                    throw new IllegalStateException("set -Dawsworld.loopbackHosts, -Dawsworld.loopbackSuffix and "
                            + "-Dawsworld.refusal (src/awsworld/local/dynamodb_local.py does)");
                }
                return new Rule(Set.of(hosts.toLowerCase(Locale.ROOT).split(",")), suffix, refusal);
            }

            boolean fromThisMachine(String host, String origin) {
                return loopbackHost(host) && loopbackOrigin(origin);
            }

            boolean loopbackName(String name) {
                String lower = name.toLowerCase(Locale.ROOT);
                return hosts.contains(lower) || lower.endsWith(suffix);
            }

            boolean loopbackHost(String host) {
                if (host == null || host.isEmpty()) {
                    return false;
                }
                int colon = host.lastIndexOf(':');
                String name = host.endsWith("]") || colon < 0 ? host : host.substring(0, colon);
                return loopbackName(name);
            }

            boolean loopbackOrigin(String origin) {
                if (origin == null) {
                    return true;
                }
                try {
                    String name = new URI(origin).getHost();
                    return name != null && loopbackName(name);
                } catch (java.net.URISyntaxException error) {
                    return false;
                }
            }
        }
    }
}
