// A real OAuth 2.1 authorization server (node-oidc-provider) in front of a protected MCP resource
// server built from the official TypeScript SDK's own resource-server pieces (requireBearerAuth,
// mcpAuthMetadataRouter, McpServer over streamable HTTP). Both listen on 127.0.0.1 only.
//
// The provider does what the MCP authorization spec asks of one: authorization code with PKCE
// (S256, required for public clients), dynamic client registration (RFC 7591), resource
// indicators (RFC 8707: every token is bound to the resource server's URL as its audience),
// refresh tokens, and the client-credentials grant for a pre-registered machine client. Login
// and consent are the provider's own development forms: the tests post them as a person would.
//
// Env: MALJAN_OIDC_PROVIDER (the oidc-provider package dir), MCP_SDK (the @modelcontextprotocol/sdk
// package dir), ACCESS_TTL (seconds an access token lives; default 3600).
// Prints one JSON line when both listen: {"issuer","mcp","m2m_client_id","m2m_client_secret"}.
// GET <resource>/stats answers what happened: grants by type, registrations, tokens issued
// (the tests look for these in logs and files), and the calls the MCP server answered.

import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const need = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
};
const providerDir = need('MALJAN_OIDC_PROVIDER');
const sdkDir = need('MCP_SDK');
const ttl = Number(process.env.ACCESS_TTL || '3600');
const load = (dir, rel) => import(pathToFileURL(path.join(dir, rel)).href);

const { default: Provider } = await load(providerDir, 'lib/index.js');
const { McpServer } = await load(sdkDir, 'dist/esm/server/mcp.js');
const { StreamableHTTPServerTransport } = await load(sdkDir, 'dist/esm/server/streamableHttp.js');
const { requireBearerAuth } = await load(sdkDir, 'dist/esm/server/auth/middleware/bearerAuth.js');
const { mcpAuthMetadataRouter, getOAuthProtectedResourceMetadataUrl } = await load(
  sdkDir,
  'dist/esm/server/auth/router.js',
);
const { InvalidTokenError } = await load(sdkDir, 'dist/esm/server/auth/errors.js');
const { default: express } = await import(
  pathToFileURL(path.join(sdkDir, '..', '..', 'express', 'index.js')).href
);

const listen = (server) =>
  new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));

// Ports first: the issuer and the resource URL name them.
const asServer = http.createServer();
const rsApp = express();
const rsServer = http.createServer(rsApp);
const asPort = await listen(asServer);
const rsPort = await listen(rsServer);
const issuer = `http://127.0.0.1:${asPort}`;
const resource = `http://127.0.0.1:${rsPort}/mcp`;
const SCOPE = 'mcp:tools';

const stats = { grants: {}, registrations: 0, access_tokens: [], refresh_tokens: [], calls: [] };
const m2m = { client_id: 'maljan-machine', client_secret: randomBytes(24).toString('base64url') };

const provider = new Provider(issuer, {
  clients: [
    {
      ...m2m,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  scopes: ['openid', 'offline_access', SCOPE],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== resource) throw new Provider.errors.InvalidTarget();
        return { scope: SCOPE, audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
  // A refresh token whenever the client may use one (not only for offline_access).
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { AccessToken: ttl, ClientCredentials: ttl, RefreshToken: 86400 },
  // The development interactions keep no accounts: any login and password sign in.
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
});
provider.proxy = false;
provider.on('grant.success', (ctx) => {
  const type = ctx.oidc.params.grant_type;
  stats.grants[type] = (stats.grants[type] || 0) + 1;
});
provider.on('registration_create.success', () => {
  stats.registrations += 1;
});
provider.on('access_token.saved', (t) => stats.access_tokens.push(t.jti));
provider.on('client_credentials.saved', (t) => stats.access_tokens.push(t.jti));
provider.on('refresh_token.saved', (t) => stats.refresh_tokens.push(t.jti));
asServer.on('request', provider.callback());

// The resource server: tokens are looked up in the provider that issued them (as introspection
// would), and must name this server as their audience.
const verifier = {
  verifyAccessToken: async (token) => {
    const t = (await provider.AccessToken.find(token)) ?? (await provider.ClientCredentials.find(token));
    if (!t) throw new InvalidTokenError('unknown or expired token');
    return {
      token,
      clientId: t.clientId,
      scopes: (t.scope || '').split(' ').filter(Boolean),
      expiresAt: t.exp,
      resource: new URL(Array.isArray(t.aud) ? t.aud[0] : t.aud),
    };
  },
};
const asMetadata = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
rsApp.use(
  mcpAuthMetadataRouter({
    oauthMetadata: asMetadata,
    resourceServerUrl: new URL(resource),
    scopesSupported: [SCOPE],
    resourceName: 'maljan OAuth test resource',
  }),
);
rsApp.get('/stats', (_req, res) => res.json(stats));
rsApp.use(express.json());
rsApp.all(
  '/mcp',
  requireBearerAuth({
    verifier,
    requiredScopes: [SCOPE],
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(new URL(resource)),
    expectedResource: new URL(resource),
  }),
  async (req, res) => {
    const server = new McpServer({ name: 'oauth-resource', version: '1.0.0' });
    server.registerTool(
      'whoami',
      { description: 'Who the bearer token says the caller is.' },
      async (extra) => {
        const info = extra.authInfo;
        stats.calls.push({ client_id: info.clientId, scopes: info.scopes });
        return {
          content: [{ type: 'text', text: JSON.stringify({ client_id: info.clientId, scopes: info.scopes }) }],
        };
      },
    );
    // Stateless: one transport per request, as the SDK's examples do.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  },
);

console.log(JSON.stringify({ issuer, mcp: resource, m2m_client_id: m2m.client_id, m2m_client_secret: m2m.client_secret }));
