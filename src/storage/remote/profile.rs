//! The AWS shared configuration files, which `object_store` does not read:
//! `AWS_PROFILE` (else `default`) in `~/.aws/credentials` and
//! `~/.aws/config` (or `AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`),
//! as the AWS CLI finds them.
//!
//! Static keys (`aws_access_key_id`, `aws_secret_access_key`,
//! `aws_session_token`), `credential_process`, `region` and `endpoint_url`
//! are read; the environment wins over the files, as in the AWS CLI.
//!
//! `credential_process` ([`ProcessCredentials`]) is run as the AWS SDKs
//! run it on Unix (`sh -c COMMAND`), its JSON output (`Version` 1,
//! `AccessKeyId`, `SecretAccessKey`, `SessionToken`, `Expiration`) is the
//! credential, kept until five minutes before its `Expiration` (for ever
//! without one) and fetched again then. Its secrets are registered with
//! [`super::remember_secrets`] so no message can show them, and neither its
//! output nor its command line appears in an error: the command may carry
//! a token.
//!
//! A profile with `role_arn` assumes that role ([`super::role`]) with the
//! credentials of its `source_profile` (keys, a `credential_process`, or
//! another role: chains up to [`MAX_CHAIN`] deep) or of the
//! environment (`credential_source = Environment`), as the AWS CLI does.
//! SSO profiles (`sso_session`, `sso_start_url`) are not followed (that
//! needs the SSO token cache and its refresh): their keys are left to the
//! environment, web identity and instance metadata, with a debug line.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use object_store::CredentialProvider;
use object_store::aws::AwsCredential;

/// Profiles a role chain may pass through.
pub const MAX_CHAIN: usize = 8;

/// What a profile says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
    /// A command printing credentials as JSON.
    pub credential_process: Option<String>,
    /// A role to assume (`role_arn`), and with what.
    pub role: Option<Role>,
}

impl Profile {
    /// Every secret this profile holds, its role's source profiles' too.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = [&self.secret_access_key, &self.session_token]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if let Some(Role {
            source: RoleSource::Profile(p),
            ..
        }) = &self.role
        {
            out.extend(p.secrets());
        }
        out
    }
}

/// A profile's `role_arn` and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub role_arn: String,
    pub source: RoleSource,
    pub external_id: Option<String>,
    pub session_name: Option<String>,
    pub duration_seconds: Option<u32>,
}

/// Whose credentials assume a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleSource {
    /// `source_profile`: that profile's (itself possibly a role).
    Profile(Box<Profile>),
    /// `credential_source = Environment`: `AWS_ACCESS_KEY_ID`...
    Environment,
    /// Something slabfs does not follow, and why (a cycle, a chain too
    /// long, `Ec2InstanceMetadata`...): the role cannot be assumed.
    Unsupported(String),
}

/// The sections of an INI file: name → key → value. Comments (`#`, `;`)
/// and blank lines skipped; keys lower-cased.
fn parse_ini(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.trim().to_string());
            continue;
        }
        if let (Some(s), Some((k, v))) = (&section, line.split_once('=')) {
            out.entry(s.clone())
                .or_default()
                .insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    out
}

fn home_file(var: &str, rel: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rel)),
    }
}

/// The profile `name` from the texts of the credentials and config files.
pub fn from_texts(name: &str, credentials: &str, config: &str) -> Profile {
    let creds = parse_ini(credentials);
    let conf = parse_ini(config);
    profile_in(name, &creds, &conf, &mut Vec::new())
}

type Ini = HashMap<String, HashMap<String, String>>;

/// The profile `name`; `chain` holds the profiles whose role it sources,
/// outermost first (a cycle or a chain too long is an unsupported source).
fn profile_in(name: &str, creds: &Ini, conf: &Ini, chain: &mut Vec<String>) -> Profile {
    // In the config file every profile but `default` is `[profile NAME]`.
    let conf_section = conf
        .get(&format!("profile {name}"))
        .or_else(|| (name == "default").then(|| conf.get("default")).flatten());
    let cred_section = creds.get(name);
    let get = |key: &str| {
        cred_section
            .and_then(|s| s.get(key))
            .or_else(|| conf_section.and_then(|s| s.get(key)))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let p = Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token"),
        region: conf_section.and_then(|s| s.get("region")).cloned(),
        endpoint_url: conf_section.and_then(|s| s.get("endpoint_url")).cloned(),
        credential_process: conf_section
            .and_then(|s| s.get("credential_process"))
            .filter(|v| !v.is_empty())
            .cloned(),
        role: None,
    };
    let Some(role_arn) = get("role_arn") else {
        let sso = ["sso_session", "sso_start_url"];
        if p.access_key_id.is_none()
            && p.credential_process.is_none()
            && sso.iter().any(|k| get(k).is_some())
        {
            log::debug!(
                "AWS profile {name:?} gets its credentials through SSO, which slabfs does not \
                 follow; using the environment or instance credentials"
            );
        }
        return p;
    };
    let source = match (get("source_profile"), get("credential_source")) {
        (Some(_), Some(_)) => RoleSource::Unsupported(format!(
            "profile {name:?} has both source_profile and credential_source"
        )),
        // A profile may source its own keys (the AWS CLI allows it).
        (Some(src), None) if src == name => RoleSource::Profile(Box::new(Profile {
            role: None,
            ..p.clone()
        })),
        (Some(src), None) if chain.contains(&src) => RoleSource::Unsupported(format!(
            "the source_profile chain {} -> {name} -> {src} is a cycle",
            chain.join(" -> ")
        )),
        (Some(_), None) if chain.len() >= MAX_CHAIN => RoleSource::Unsupported(format!(
            "source_profile chains longer than {} profiles",
            MAX_CHAIN
        )),
        (Some(src), None) => {
            chain.push(name.to_string());
            let s = profile_in(&src, creds, conf, chain);
            chain.pop();
            RoleSource::Profile(Box::new(s))
        }
        (None, Some(c)) if c == "Environment" => RoleSource::Environment,
        (None, Some(c)) => RoleSource::Unsupported(format!(
            "credential_source = {c} (only Environment is followed; the instance's own \
             credentials are used without a profile)"
        )),
        (None, None) => RoleSource::Unsupported(format!(
            "profile {name:?} has role_arn without source_profile or credential_source"
        )),
    };
    Profile {
        role: Some(Role {
            role_arn,
            source,
            external_id: get("external_id"),
            session_name: get("role_session_name"),
            duration_seconds: get("duration_seconds").and_then(|d| d.parse().ok()),
        }),
        ..p
    }
}

/// The profile the AWS CLI would use, from its files (missing files are
/// empty).
pub fn load() -> Profile {
    let name = std::env::var("AWS_PROFILE")
        .or_else(|_| std::env::var("AWS_DEFAULT_PROFILE"))
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let read = |p: Option<PathBuf>| {
        p.and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    let credentials = read(home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"));
    let config = read(home_file("AWS_CONFIG_FILE", ".aws/config"));
    from_texts(&name, &credentials, &config)
}

/// The GCS endpoint the service account key names (`gcs_base_url`: the
/// way `object_store` points GCS at an emulator such as fake-gcs-server),
/// from `GOOGLE_SERVICE_ACCOUNT_KEY` (the JSON) or the file
/// `GOOGLE_SERVICE_ACCOUNT` / `GOOGLE_SERVICE_ACCOUNT_PATH`. An `http://`
/// one is allowed without TLS, as an S3 `--endpoint-url` is: the operator
/// named it.
pub fn gcs_endpoint() -> Option<String> {
    let env = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
    let json = env("GOOGLE_SERVICE_ACCOUNT_KEY").or_else(|| {
        let path = env("GOOGLE_SERVICE_ACCOUNT").or_else(|| env("GOOGLE_SERVICE_ACCOUNT_PATH"))?;
        std::fs::read_to_string(path).ok()
    })?;
    let key: serde_json::Value = serde_json::from_str(&json).ok()?;
    key.get("gcs_base_url")?.as_str().map(str::to_string)
}

/// Credentials fetched before their expiry by this margin, so that a
/// request signed with them is not refused on its way.
const EXPIRY_MARGIN: Duration = Duration::from_secs(300);

/// Longest output read from a credential process.
const MAX_OUTPUT: u64 = 64 << 10;

/// The credentials of a profile's `credential_process`.
pub struct ProcessCredentials {
    command: String,
    /// The last credential, kept until it nears its expiry.
    kept: Kept,
}

impl std::fmt::Debug for ProcessCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Neither the command (it may carry a token) nor the credential.
        f.write_str("ProcessCredentials")
    }
}

/// Why a credential process gave no credential. Messages never hold its
/// output or command line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    #[error("credential_process could not be run: {0}")]
    Spawn(std::io::Error),
    #[error("credential_process failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("credential_process printed no valid credentials: {0}")]
    Output(String),
}

impl ProcessCredentials {
    pub fn new(command: String) -> ProcessCredentials {
        ProcessCredentials {
            command,
            kept: Kept::default(),
        }
    }

    /// Run the command once: its credential and its expiry.
    fn run(command: &str) -> Result<(AwsCredential, Option<SystemTime>), ProcessError> {
        use std::io::Read;
        use std::process::{Command, Stdio};
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(ProcessError::Spawn)?;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let _ = stderr.take(MAX_OUTPUT).read_to_end(&mut err);
            err
        });
        stdout
            .take(MAX_OUTPUT)
            .read_to_end(&mut out)
            .map_err(ProcessError::Spawn)?;
        let status = child.wait().map_err(ProcessError::Spawn)?;
        let err = reader.join().unwrap_or_default();
        if !status.success() {
            let text = String::from_utf8_lossy(&err);
            let first = text.lines().next().unwrap_or("").chars().take(200);
            return Err(ProcessError::Failed {
                status: status.to_string(),
                stderr: super::redact(&first.collect::<String>()),
            });
        }
        Self::parse(&out)
    }

    /// The credential in the process's output.
    fn parse(out: &[u8]) -> Result<(AwsCredential, Option<SystemTime>), ProcessError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Output {
            version: u32,
            access_key_id: String,
            secret_access_key: String,
            session_token: Option<String>,
            expiration: Option<String>,
        }
        // serde_json's message may quote the input: say only where.
        let o: Output = serde_json::from_slice(out).map_err(|e| {
            ProcessError::Output(format!(
                "not the expected JSON (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if o.version != 1 {
            return Err(ProcessError::Output(format!(
                "Version {}, only 1 is defined",
                o.version
            )));
        }
        super::remember_secrets(
            std::iter::once(o.secret_access_key.clone()).chain(o.session_token.clone()),
        );
        let expires = match o.expiration {
            None => None,
            Some(t) => {
                let at = chrono::DateTime::parse_from_rfc3339(&t).map_err(|e| {
                    ProcessError::Output(format!("Expiration {t:?} is no RFC 3339 time: {e}"))
                })?;
                let secs = u64::try_from(at.timestamp()).unwrap_or(0);
                Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            }
        };
        Ok((
            AwsCredential {
                key_id: o.access_key_id,
                secret_key: o.secret_access_key,
                token: o.session_token,
            },
            expires,
        ))
    }
}

#[async_trait::async_trait]
impl CredentialProvider for ProcessCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let command = self.command.clone();
        self.kept
            .get(async move {
                tokio::task::spawn_blocking(move || Self::run(&command))
                    .await
                    .map_err(|e| ProcessError::Output(format!("interrupted: {e}")))
                    .and_then(|r| r)
            })
            .await
    }
}

/// A credential kept until [`EXPIRY_MARGIN`] before it expires (for the
/// process's life without an expiry), then fetched again: what every
/// credential provider of a profile does with what it fetched.
#[derive(Default)]
pub(crate) struct Kept(tokio::sync::Mutex<Option<(Arc<AwsCredential>, Option<SystemTime>)>>);

impl Kept {
    /// The kept credential, or the one `fetch` gives (then kept). Its
    /// error, whose message shows no secret, is an `object_store` error
    /// for the request that needed the credential.
    pub(crate) async fn get<E>(
        &self,
        fetch: impl std::future::Future<Output = Result<(AwsCredential, Option<SystemTime>), E>>,
    ) -> object_store::Result<Arc<AwsCredential>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let mut kept = self.0.lock().await;
        if let Some((c, expires)) = &*kept
            && expires.is_none_or(|e| SystemTime::now() + EXPIRY_MARGIN < e)
        {
            return Ok(c.clone());
        }
        match fetch.await {
            Ok((c, expires)) => {
                let c = Arc::new(c);
                log::debug!("new AWS credentials (key id {})", c.key_id);
                *kept = Some((c.clone(), expires));
                Ok(c)
            }
            Err(e) => Err(object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_as_the_aws_cli_reads_them() {
        let credentials = "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = s1\n\
                           # a comment\n[work]\naws_access_key_id=AKIAWORK\n\
                           aws_secret_access_key=s2\naws_session_token = tok\n";
        let config = "[default]\nregion = eu-west-1\n[profile work]\nregion=us-west-2\n\
                      endpoint_url = http://127.0.0.1:9000\n[profile role]\n\
                      role_arn = arn:aws:iam::1:role/x\nsource_profile = default\n";
        let d = from_texts("default", credentials, config);
        assert_eq!(d.access_key_id.as_deref(), Some("AKIADEF"));
        assert_eq!(d.region.as_deref(), Some("eu-west-1"));
        assert_eq!(d.session_token, None);
        let w = from_texts("work", credentials, config);
        assert_eq!(w.secret_access_key.as_deref(), Some("s2"));
        assert_eq!(w.session_token.as_deref(), Some("tok"));
        assert_eq!(w.region.as_deref(), Some("us-west-2"));
        assert_eq!(w.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
        // A role profile: no keys of its own; the role, sourced from
        // `default`'s keys.
        let r = from_texts("role", credentials, config);
        assert_eq!(r.access_key_id, None);
        let role = r.role.unwrap();
        assert_eq!(role.role_arn, "arn:aws:iam::1:role/x");
        match role.source {
            RoleSource::Profile(p) => assert_eq!(p.access_key_id.as_deref(), Some("AKIADEF")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            from_texts("missing", credentials, config),
            Profile::default()
        );
    }

    #[test]
    fn role_chains_cycles_and_sources() {
        let credentials = "[base]\naws_access_key_id = AKIABASE\naws_secret_access_key = sb\n";
        let config = "[profile a]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = b\n\
                      [profile b]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = base\n\
                      external_id = ext\nrole_session_name = sess\nduration_seconds = 900\n\
                      [profile loop1]\nrole_arn = arn:aws:iam::1:role/l1\nsource_profile = loop2\n\
                      [profile loop2]\nrole_arn = arn:aws:iam::1:role/l2\nsource_profile = loop1\n\
                      [profile env]\nrole_arn = arn:aws:iam::1:role/e\ncredential_source = Environment\n\
                      [profile imds]\nrole_arn = arn:aws:iam::1:role/i\n\
                      credential_source = Ec2InstanceMetadata\n\
                      [profile own]\nrole_arn = arn:aws:iam::1:role/o\nsource_profile = own\n\
                      aws_access_key_id = AKIAOWN\naws_secret_access_key = so\n";
        // a -> b -> base's keys.
        let a = from_texts("a", credentials, config).role.unwrap();
        let RoleSource::Profile(b) = a.source else {
            panic!("{:?}", a.source)
        };
        let b_role = b.role.clone().unwrap();
        assert_eq!(b_role.external_id.as_deref(), Some("ext"));
        assert_eq!(b_role.session_name.as_deref(), Some("sess"));
        assert_eq!(b_role.duration_seconds, Some(900));
        assert!(b.secrets().contains(&"sb".to_string()));
        // A cycle is an error, not a stack overflow.
        let l = from_texts("loop1", credentials, config).role.unwrap();
        let mut source = l.source;
        let why = loop {
            match source {
                RoleSource::Profile(p) => source = p.role.unwrap().source,
                RoleSource::Unsupported(why) => break why,
                other => panic!("{other:?}"),
            }
        };
        assert!(why.contains("cycle"), "{why}");
        assert_eq!(
            from_texts("env", credentials, config).role.unwrap().source,
            RoleSource::Environment
        );
        let i = from_texts("imds", credentials, config).role.unwrap();
        assert!(
            matches!(&i.source, RoleSource::Unsupported(w) if w.contains("Ec2InstanceMetadata"))
        );
        // A profile sourcing its own keys.
        let o = from_texts("own", credentials, config).role.unwrap();
        assert!(
            matches!(&o.source, RoleSource::Profile(p) if p.access_key_id.as_deref() == Some("AKIAOWN") && p.role.is_none())
        );
    }

    fn credentials_of(p: &ProcessCredentials) -> object_store::Result<Arc<AwsCredential>> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(p.get_credential())
    }

    /// A process printing `json`, counting its runs in `runs`.
    fn process(dir: &std::path::Path, json: &str) -> (ProcessCredentials, PathBuf) {
        let runs = dir.join("runs");
        let out = dir.join("out.json");
        std::fs::write(&out, json).unwrap();
        let cmd = format!("echo x >> '{}'; cat '{}'", runs.display(), out.display());
        (ProcessCredentials::new(cmd), runs)
    }

    fn runs(path: &std::path::Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
    }

    #[test]
    fn credential_process_is_run_and_kept_until_near_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let later = chrono::Utc::now() + chrono::Duration::hours(1);
        let (p, count) = process(
            dir.path(),
            &format!(
                r#"{{"Version": 1, "AccessKeyId": "AKIAPROC", "SecretAccessKey": "ProcSecret-123456",
                    "SessionToken": "ProcToken-123456", "Expiration": "{}"}}"#,
                later.to_rfc3339()
            ),
        );
        let c = credentials_of(&p).unwrap();
        assert_eq!(c.key_id, "AKIAPROC");
        assert_eq!(c.secret_key, "ProcSecret-123456");
        assert_eq!(c.token.as_deref(), Some("ProcToken-123456"));
        // The secrets are now blanked in any message.
        assert_eq!(
            super::super::redact("x ProcSecret-123456 ProcToken-123456"),
            "x *** ***"
        );
        // Reused: the process ran once for two requests.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(p.get_credential()).unwrap();
        assert_eq!(runs(&count), 1);
        // Within the margin of its expiry: fetched again each time.
        let soon = chrono::Utc::now() + chrono::Duration::minutes(2);
        let (p, count) = process(
            dir.path(),
            &format!(
                r#"{{"Version": 1, "AccessKeyId": "AKIAPROC", "SecretAccessKey": "s-123456",
                    "Expiration": "{}"}}"#,
                soon.to_rfc3339()
            ),
        );
        std::fs::remove_file(&count).unwrap();
        rt.block_on(p.get_credential()).unwrap();
        rt.block_on(p.get_credential()).unwrap();
        assert_eq!(runs(&count), 2);
    }

    #[test]
    fn credential_process_failures_show_no_output() {
        let dir = tempfile::tempdir().unwrap();
        // Output that is not the credential JSON (a secret in a wrong
        // field name): the message must not quote it.
        let (p, _) = process(
            dir.path(),
            r#"{"Version": 1, "AccessKeyId": "A", "Secret": "LeakMe-987654"}"#,
        );
        let e = credentials_of(&p).unwrap_err().to_string();
        assert!(
            e.contains("no valid credentials") && !e.contains("LeakMe"),
            "{e}"
        );
        let p = ProcessCredentials::new("echo 'bad token TokenInCmd-55555' >&2; exit 3".into());
        let e = credentials_of(&p).unwrap_err().to_string();
        assert!(e.contains("exit status: 3"), "{e}");
        let (p, _) = process(
            dir.path(),
            r#"{"Version": 2, "AccessKeyId": "A", "SecretAccessKey": "S"}"#,
        );
        assert!(
            credentials_of(&p)
                .unwrap_err()
                .to_string()
                .contains("Version 2")
        );
        assert!(format!("{:?}", ProcessCredentials::new("x".into())) == "ProcessCredentials");
    }

    #[test]
    fn credential_process_is_read_from_the_profile() {
        let config = "[profile p]\ncredential_process = /usr/bin/get-creds --role x\n";
        let p = from_texts("p", "", config);
        assert_eq!(
            p.credential_process.as_deref(),
            Some("/usr/bin/get-creds --role x")
        );
        assert_eq!(p.access_key_id, None);
    }
}
