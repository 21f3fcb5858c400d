//! The AWS shared configuration files, which `object_store` does not read:
//! `AWS_PROFILE` (else `default`) in `~/.aws/credentials` and
//! `~/.aws/config` (or `AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`),
//! as the AWS CLI finds them.
//!
//! Static keys (`aws_access_key_id`, `aws_secret_access_key`,
//! `aws_session_token`), `region` and `endpoint_url` are read; the
//! environment wins over the files, as in the AWS CLI. Profiles that get
//! their credentials another way (`role_arn` with `source_profile`,
//! `credential_process`, SSO) are not followed: their keys are left to the
//! environment, web identity and instance metadata, with a debug line.

use std::collections::HashMap;
use std::path::PathBuf;

/// What a profile says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
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
    };
    let indirect = [
        "role_arn",
        "credential_process",
        "sso_session",
        "sso_start_url",
    ];
    if p.access_key_id.is_none() && indirect.iter().any(|k| get(k).is_some()) {
        log::debug!(
            "AWS profile {name:?} gets its credentials through a role, a process or SSO, \
             which slabfs does not follow; using the environment or instance credentials"
        );
    }
    p
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
        // A role profile: no keys of its own (not followed).
        assert_eq!(from_texts("role", credentials, config).access_key_id, None);
        assert_eq!(
            from_texts("missing", credentials, config),
            Profile::default()
        );
    }
}
