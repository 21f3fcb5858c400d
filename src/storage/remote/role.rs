//! AWS profiles that assume a role: `role_arn` with `source_profile` (or
//! `credential_source = Environment`), as the AWS CLI follows them.
//!
//! The role's credentials come from STS `AssumeRole`, a query API call
//! signed with the source's credentials. `object_store` has no STS client
//! beyond web identity, so this module builds that one call: the request
//! is signed by `object_store`'s own SigV4 signer
//! ([`object_store::aws::AwsAuthorizer`]), sent by the same `reqwest`
//! client every store uses ([`super::client`], redirects kept to the
//! origin), and its XML answer read with `quick-xml` (the parser
//! `object_store` reads S3's answers with). No signing or HTTP code of our
//! own.
//!
//! The source may itself be a role (role chaining, up to
//! [`MAX_CHAIN`](super::profile::MAX_CHAIN) profiles deep, a cycle is an error), static keys, or a
//! `credential_process`. The credential is kept until five minutes before
//! its `Expiration` and asked again then; a failure is an error for the
//! requests that needed it, naming the role and STS's error code and
//! message, never a key. The endpoint is `AWS_ENDPOINT_URL_STS`, else
//! `AWS_ENDPOINT_URL`, else the profile's `endpoint_url`... as the AWS
//! SDKs pick it, else `https://sts.REGION.amazonaws.com`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::{CredentialProvider, StaticCredentialProvider};

use super::profile::{Kept, ProcessCredentials, Profile, RoleSource};

/// The credentials of a source profile, whatever gives them.
pub type AwsProvider = Arc<dyn CredentialProvider<Credential = AwsCredential>>;

/// A role assumed with STS `AssumeRole`, signed with `source`'s
/// credentials.
pub struct AssumedRole {
    pub role_arn: String,
    pub session_name: String,
    pub external_id: Option<String>,
    pub duration_seconds: Option<u32>,
    pub region: String,
    /// STS's URL (`https://sts.REGION.amazonaws.com`, or an override).
    pub endpoint: String,
    pub source: AwsProvider,
    /// The timeouts STS is called with (the [`super::Remote`]'s).
    pub config: super::config::Config,
    /// The last credential, kept until it nears its expiry.
    kept: Kept,
}

impl std::fmt::Debug for AssumedRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The role is no secret; the credentials are.
        f.debug_struct("AssumedRole")
            .field("role_arn", &self.role_arn)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// Why a role gave no credential. Messages never hold a key or token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RoleError {
    #[error("assuming role {role}: the source profile's credentials: {source}")]
    Source {
        role: String,
        #[source]
        source: object_store::Error,
    },
    #[error("assuming role {role}: {detail}")]
    Sts { role: String, detail: String },
}

impl AssumedRole {
    pub fn new(
        role_arn: String,
        session_name: Option<String>,
        external_id: Option<String>,
        duration_seconds: Option<u32>,
        region: String,
        endpoint: String,
        source: AwsProvider,
    ) -> AssumedRole {
        AssumedRole {
            role_arn,
            // What the AWS CLI names its sessions when none is given.
            session_name: session_name.unwrap_or_else(|| {
                let secs = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                format!("slabfs-session-{secs}")
            }),
            external_id,
            duration_seconds,
            region,
            endpoint,
            source,
            config: super::config::Config::default(),
            kept: Kept::default(),
        }
    }

    /// The role called with `config`'s timeouts.
    pub fn with_config(mut self, config: super::config::Config) -> AssumedRole {
        self.config = config;
        self
    }

    fn sts_error(&self, detail: impl Into<String>) -> RoleError {
        RoleError::Sts {
            role: self.role_arn.clone(),
            detail: super::redact(&detail.into()),
        }
    }

    /// The `AssumeRole` call's form.
    fn form(&self) -> String {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", "AssumeRole")
            .append_pair("Version", "2011-06-15")
            .append_pair("RoleArn", &self.role_arn)
            .append_pair("RoleSessionName", &self.session_name);
        if let Some(id) = &self.external_id {
            form.append_pair("ExternalId", id);
        }
        if let Some(d) = self.duration_seconds {
            form.append_pair("DurationSeconds", &d.to_string());
        }
        form.finish()
    }

    /// One `AssumeRole` call: the credential and when it expires.
    async fn assume(&self) -> Result<(AwsCredential, SystemTime), RoleError> {
        let source = self
            .source
            .get_credential()
            .await
            .map_err(|source| RoleError::Source {
                role: self.role_arn.clone(),
                source,
            })?;
        let body = self.form();
        let mut request = http::Request::builder()
            .method("POST")
            .uri(&self.endpoint)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(object_store::client::HttpRequestBody::from(body.clone()))
            .map_err(|e| self.sts_error(format!("endpoint {}: {e}", self.endpoint)))?;
        AwsAuthorizer::new(&source, "sts", &self.region)
            .try_authorize(&mut request, None)
            .map_err(|e| self.sts_error(format!("signing: {e}")))?;
        let client = super::client::reqwest_client(&self.config.client(true))
            .map_err(|e| self.sts_error(e.to_string()))?;
        let answer = client
            .post(&self.endpoint)
            .headers(request.headers().clone())
            .body(body)
            .timeout(self.config.timeout)
            .send()
            .await
            .map_err(|e| self.sts_error(format!("{}: {e}", self.endpoint)))?;
        let status = answer.status();
        let text = answer
            .text()
            .await
            .map_err(|e| self.sts_error(format!("{}: {e}", self.endpoint)))?;
        if !status.is_success() {
            let why: Result<ErrorResponse, _> = quick_xml::de::from_str(&text);
            let detail = match why {
                Ok(e) => format!("{status}: {}: {}", e.error.code, e.error.message),
                Err(_) => status.to_string(),
            };
            return Err(self.sts_error(detail));
        }
        let ok: AssumeRoleResponse = quick_xml::de::from_str(&text)
            .map_err(|e| self.sts_error(format!("not an AssumeRole answer: {e}")))?;
        let c = ok.assume_role_result.credentials;
        super::remember_secrets([c.secret_access_key.clone(), c.session_token.clone()]);
        let expires = chrono::DateTime::parse_from_rfc3339(&c.expiration)
            .map_err(|e| self.sts_error(format!("Expiration {:?}: {e}", c.expiration)))?;
        let secs = u64::try_from(expires.timestamp()).unwrap_or(0);
        Ok((
            AwsCredential {
                key_id: c.access_key_id,
                secret_key: c.secret_access_key,
                token: Some(c.session_token),
            },
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
        ))
    }
}

/// The credentials `profile` gives: its role assumed (with its source's
/// credentials, built the same way), its keys, or its
/// `credential_process`; `None` when it names none of them. `Err` says
/// why a role cannot be assumed (a cycle, an unsupported source). STS is
/// called with `config`'s timeouts.
pub fn provider(
    profile: &Profile,
    region: &str,
    endpoint: &str,
    config: &super::config::Config,
) -> Result<Option<AwsProvider>, String> {
    if let Some(role) = &profile.role {
        let source: AwsProvider = match &role.source {
            RoleSource::Profile(p) => provider(p, region, endpoint, config)?.ok_or_else(|| {
                format!(
                    "role {}: its source_profile has no credentials (keys, credential_process \
                     or a role)",
                    role.role_arn
                )
            })?,
            RoleSource::Environment => {
                let env = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
                let (Some(key_id), Some(secret_key)) =
                    (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
                else {
                    return Err(format!(
                        "role {}: credential_source = Environment, and AWS_ACCESS_KEY_ID or \
                         AWS_SECRET_ACCESS_KEY is not set",
                        role.role_arn
                    ));
                };
                Arc::new(StaticCredentialProvider::new(AwsCredential {
                    key_id,
                    secret_key,
                    token: env("AWS_SESSION_TOKEN"),
                }))
            }
            RoleSource::Unsupported(why) => {
                return Err(format!("role {}: {why}", role.role_arn));
            }
        };
        return Ok(Some(Arc::new(
            AssumedRole::new(
                role.role_arn.clone(),
                role.session_name.clone(),
                role.external_id.clone(),
                role.duration_seconds,
                region.to_string(),
                endpoint.to_string(),
                source,
            )
            .with_config(config.clone()),
        )));
    }
    if let (Some(key_id), Some(secret_key)) = (&profile.access_key_id, &profile.secret_access_key) {
        return Ok(Some(Arc::new(StaticCredentialProvider::new(
            AwsCredential {
                key_id: key_id.clone(),
                secret_key: secret_key.clone(),
                token: profile.session_token.clone(),
            },
        ))));
    }
    Ok(profile
        .credential_process
        .clone()
        .map(|c| Arc::new(ProcessCredentials::new(c)) as AwsProvider))
}

/// Where STS is: `AWS_ENDPOINT_URL_STS`, else `AWS_ENDPOINT_URL`, else the
/// profile's `endpoint_url`, else AWS's regional endpoint.
pub fn sts_endpoint(profile: &Profile, region: &str) -> String {
    ["AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .or_else(|| profile.endpoint_url.clone())
        .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"))
}

#[async_trait::async_trait]
impl CredentialProvider for AssumedRole {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        self.kept
            .get(async {
                let (c, expires) = self.assume().await?;
                log::debug!(
                    "assumed role {} (key id {}, session {})",
                    self.role_arn,
                    c.key_id,
                    self.session_name
                );
                Ok::<_, RoleError>((c, Some(expires)))
            })
            .await
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResponse {
    assume_role_result: AssumeRoleResult,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResult {
    credentials: Credentials,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Credentials {
    access_key_id: String,
    secret_access_key: String,
    session_token: String,
    expiration: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorResponse {
    error: StsError,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsError {
    code: String,
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_answers_parse() {
        let ok = r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
          <AssumeRoleResult><Credentials><AccessKeyId>ASIAX</AccessKeyId>
          <SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken>
          <Expiration>2026-11-26T01:12:17.456274Z</Expiration></Credentials>
          <AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/x</Arn></AssumedRoleUser>
          </AssumeRoleResult></AssumeRoleResponse>"#;
        let r: AssumeRoleResponse = quick_xml::de::from_str(ok).unwrap();
        assert_eq!(r.assume_role_result.credentials.access_key_id, "ASIAX");
        let err = r#"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>
          <Message>not allowed</Message></Error><RequestId>1</RequestId></ErrorResponse>"#;
        let e: ErrorResponse = quick_xml::de::from_str(err).unwrap();
        assert_eq!(
            (e.error.code.as_str(), e.error.message.as_str()),
            ("AccessDenied", "not allowed")
        );
    }
}
