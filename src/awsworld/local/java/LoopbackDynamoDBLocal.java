// Runs AWS's DynamoDB Local bound to 127.0.0.1 only (it otherwise listens on every interface).
//
// Launched as a single-file source program, with DynamoDBLocal.jar and DynamoDBLocal_lib/* on the class path:
//   java -Djava.library.path=<lib> -cp "<jar>:<lib>/*" LoopbackDynamoDBLocal.java -inMemory -port 0 ...
// The arguments are DynamoDB Local's own. With "-port 0" the kernel picks a free port; the line
// "READY <port>" on stdout says the server accepts connections and on which port. (DynamoDB Local's own
// argument check rejects port 0, so it is given a placeholder and the connector is set to port 0 directly.)
// With -Dawsworld.watchStdin=true the process exits when its stdin reaches end of file, so it never outlives a
// parent that holds the other end of a pipe, even one that is killed without a chance to stop it.

import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
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
}
