/**
 * SigV4 signing for a World server behind a Lambda Function URL with `AuthType: AWS_IAM` (the stack's
 * `WorldServerFunction`): AWS checks each request's signature (service `lambda`) and the caller's
 * `lambda:InvokeFunctionUrl` permission before the server sees it.
 *
 * The signing is the AWS SDK's own (`@smithy/signature-v4` with `@aws-crypto/sha256-js`), and the credentials come
 * from its standard provider chain (`@aws-sdk/credential-provider-node`: environment, shared config and SSO, web
 * identity, ECS and EC2 roles; refreshed before they expire) unless given. `index.ts` imports this module only when
 * signing is on, so a World on a token or loopback server never loads the AWS SDK.
 *
 * What is signed is what awsworld's Python client signs (`HttpClient(url, aws_region=...)`, botocore's `SigV4Auth`):
 * the method, the path (encoded once by the caller, once more by the signer, as AWS expects for every service but
 * S3), the query, the `host` and `content-type` headers and the body's SHA-256, with `x-amz-date` and, for
 * temporary credentials, `x-amz-security-token`. No `x-amz-content-sha256` header is added (botocore's signer adds
 * none either; the body's hash is in the signature all the same). `test/auth.node-test.mjs` checks that both
 * signers give the same signature for the same request, credentials and time.
 */
import { Sha256 } from '@aws-crypto/sha256-js';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';

/** AWS credentials, as the AWS SDK's providers return them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** Credentials, or a function returning them (called for each request: a provider caches and refreshes). */
export type AwsCredentialsSource = AwsCredentials | (() => Promise<AwsCredentials>);

/** One request as it will be sent: its full URL (path and query already encoded), headers and body. */
export interface RequestToSign {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/** The headers to send: the request's own plus `authorization`, `x-amz-date` (and `x-amz-security-token`). */
export type Signer = (request: RequestToSign, signingDate?: Date) => Promise<Record<string, string>>;

export interface SignerOptions {
  /** The Function URL's region. */
  region: string;
  /** Default: the AWS SDK's standard provider chain. */
  credentials?: AwsCredentialsSource;
}

export function createSigner(options: SignerOptions): Signer {
  const signer = new SignatureV4({
    service: 'lambda',
    region: options.region,
    credentials: options.credentials ?? defaultProvider(),
    sha256: Sha256,
    applyChecksum: false,
  });
  return async (request, signingDate) => {
    const url = new URL(request.url);
    const query: Record<string, string | string[]> = {};
    for (const key of new Set(url.searchParams.keys())) {
      const values = url.searchParams.getAll(key);
      query[key] = values.length === 1 ? values[0] : values;
    }
    const signed = await signer.sign(
      {
        method: request.method,
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port ? Number(url.port) : undefined,
        path: url.pathname,
        query,
        headers: { ...request.headers, host: url.host },
        body: request.body,
      },
      { signingDate },
    );
    return signed.headers;
  };
}
