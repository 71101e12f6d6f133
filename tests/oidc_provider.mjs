// A real OpenID Connect provider for the tests (and for trying docs/team.md on one machine):
// npm's OpenID-certified `oidc-provider` with its development sign-in pages, where any login
// name signs in as that account. An account's email is its login name; "unverified-…" logins
// get email_verified: false; "noclaim:EMAIL" logins get EMAIL and no email_verified claim at all
// (as multi-tenant Microsoft Entra ID sends it).
//
//   node tests/oidc_provider.mjs PACKAGE_DIR PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI
//
// PACKAGE_DIR is the installed node_modules/oidc-provider folder (tests/real_clients.py). It
// prints "ready ISSUER" once it listens on 127.0.0.1:PORT. Never for production: the accounts
// are whatever anyone types, the keys are made at start and the cookie key is fixed.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [pkg, port, clientId, clientSecret, redirectUri] = process.argv.slice(2);
const { default: Provider } = await import(pathToFileURL(path.join(pkg, "lib", "index.js")).href);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    post_logout_redirect_uris: [redirectUri],
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }],
  claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        if (id.startsWith("noclaim:")) {
          const email = id.slice("noclaim:".length);
          return { sub: id, email, name: email.split("@")[0] };
        }
        return { sub: id, email: id, email_verified: !id.startsWith("unverified"), name: id.split("@")[0] };
      },
    };
  },
  // The scopes' claims (email) in the ID token itself: Streamlit reads the ID token, not userinfo.
  conformIdTokenClaims: false,
  cookies: { keys: ["loopledger-tests-only"] },
  features: { devInteractions: { enabled: true } },
});

provider.listen(Number(port), "127.0.0.1", () => console.log(`ready ${issuer}`));
