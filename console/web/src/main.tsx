import { FormEvent, StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { Session, api, get, setCsrf } from "./api";
import { Audit } from "./Audit";
import { ErrorBox, href, useHashRoute } from "./common";
import { GroupPage, Groups } from "./Groups";
import { Messages } from "./Messages";
import { Overview } from "./Overview";
import { Security } from "./Security";
import { ShareGroupPage, ShareGroups } from "./ShareGroups";
import { Transactions } from "./Transactions";
import { TopicPage, Topics } from "./Topics";
import "./styles.css";

function SignIn({ sasl, certs, onSignedIn }: { sasl: string | null; certs: boolean; onSignedIn: (s: Session) => void }) {
  const [password, setPassword] = useState("");
  const [user, setUser] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [token, setToken] = useState("");
  const oauth = sasl === "OAUTHBEARER";
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    try {
      const s = await api<Session>("POST", "/api/session", oauth ? { token } : { password, user: user || undefined });
      setCsrf(s.csrf_token);
      onSignedIn(s);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <main className="signin">
      <form className="panel" onSubmit={(e) => void submit(e)} aria-label="Sign in">
        <h1>Tidelog console</h1>
        {oauth && (
          <>
            <p className="muted">Paste your OAuth bearer token (a JWT from your identity provider): the console talks to the cluster as its principal, so the cluster's ACLs decide what you see and do. You are signed out when it expires.</p>
            <label>
              Token{" "}
              <textarea name="token" rows={5} value={token} onChange={(e) => setToken(e.target.value)} autoFocus required spellCheck={false} />
            </label>
          </>
        )}
        {sasl && !oauth && <p className="muted">Sign in with your Kafka user ({sasl}): the cluster's ACLs decide what you see and do.</p>}
        {certs && <p className="muted">Sign in with your console user: the console then connects with your client certificate, so the cluster's ACLs for it decide what you see and do.</p>}
        {!oauth && (<>
        <label>
          {sasl ? "Kafka user" : certs ? "Console user" : "Name (for the audit log)"}{" "}
          <input name="user" value={user} onChange={(e) => setUser(e.target.value)} autoComplete="username" required={!!sasl || certs} />
        </label>
        <label>
          Password{" "}
          <input name="password" type="password" value={password} onChange={(e) => setPassword(e.target.value)} autoFocus autoComplete="current-password" />
        </label>
        </>)}
        <button type="submit">Sign in</button>
        <ErrorBox error={error} />
      </form>
    </main>
  );
}

function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<string | null>(null);
  const route = useHashRoute();
  const refresh = () =>
    get<Session>("/api/session")
      .then((s) => {
        setCsrf(s.csrf_token);
        setSession(s);
      })
      .catch((e: Error) => setError(e.message));
  useEffect(() => void refresh(), []);
  if (error) return <ErrorBox error={error} />;
  if (!session) return <p>Loading…</p>;
  if (!session.signed_in)
    return <SignIn sasl={session.sasl_mechanism ?? null} certs={!!session.client_certificates} onSignedIn={(s) => setSession({ ...session, ...s })} />;
  const [page, arg] = route;
  const nav = [
    ["", "Overview"],
    ["topics", "Topics"],
    ["messages", "Messages"],
    ["groups", "Consumer groups"],
    ["share-groups", "Share groups"],
    ["transactions", "Transactions"],
    ["security", "Security"],
    ["audit", "Audit log"],
  ];
  let body;
  if (page === "topics" && arg) body = <TopicPage key={arg} name={arg} />;
  else if (page === "topics") body = <Topics />;
  else if (page === "messages" && arg) body = <Messages key={arg} topic={arg} />;
  else if (page === "messages") body = <PickTopic />;
  else if (page === "groups" && arg) body = <GroupPage key={arg} id={arg} />;
  else if (page === "groups") body = <Groups />;
  else if (page === "share-groups" && arg) body = <ShareGroupPage key={arg} id={arg} />;
  else if (page === "share-groups") body = <ShareGroups />;
  else if (page === "audit") body = <Audit />;
  else if (page === "security") body = <Security />;
  else if (page === "transactions") body = <Transactions />;
  else body = <Overview />;
  return (
    <>
      <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>
        Skip to content
      </a>
      <header>
        <strong>Tidelog console</strong>
        <nav aria-label="Pages">
          {nav.map(([p, label]) => (
            <a key={p} href={href(p)} aria-current={(page || "") === p ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span className="muted">
          {session.bootstrap} · {session.user}
        </span>
        {session.password_required && (
          <button
            onClick={() =>
              void api("DELETE", "/api/session").then(() => {
                setSession(null);
                void refresh();
              })
            }
          >
            Sign out
          </button>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {body}
      </main>
    </>
  );
}

function PickTopic() {
  return (
    <section>
      <h1>Messages</h1>
      <p>
        Choose a topic on the <a href={href("topics")}>Topics</a> page.
      </p>
    </section>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
