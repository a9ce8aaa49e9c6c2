//! The bearer tokens of the HTTP API: each stands for one client of the manager, and
//! is compared in time that does not tell where a guess went wrong.

use crate::manager::ClientId;
use sandlot_core::error::Error;

/// A bearer token and the client it stands for.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    client: ClientId,
    secret: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// The token `secret`, for the client `name`.
    pub fn new(name: &str, secret: &str) -> Token {
        Token {
            client: ClientId::new(name),
            secret: secret.to_string(),
        }
    }

    /// Tokens from a list as `SANDLOT_API_TOKENS` holds it: comma-separated,
    /// each `NAME:SECRET`, or a bare `SECRET` (then named `token-1`, `token-2`, ...).
    /// Secrets shorter than 16 characters are refused: they can be guessed.
    ///
    /// ```
    /// let tokens = sandlot::server::serve::Token::parse_list("ci:0123456789abcdef, fedcba9876543210").unwrap();
    /// assert_eq!(tokens.len(), 2);
    /// assert!(sandlot::server::serve::Token::parse_list("short").is_err());
    /// ```
    pub fn parse_list(list: &str) -> Result<Vec<Token>, Error> {
        let mut tokens = Vec::new();
        for (n, item) in list
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .enumerate()
        {
            let (name, secret) = match item.split_once(':') {
                Some((name, secret)) => (name.trim().to_string(), secret.trim()),
                None => (format!("token-{}", n + 1), item),
            };
            if secret.len() < 16 {
                return Err(Error::Serve {
                    reason: format!(
                        "the token of `{name}` is shorter than 16 characters; use a long random \
                         one (e.g. `openssl rand -hex 24`)"
                    ),
                });
            }
            tokens.push(Token::new(&name, secret));
        }
        Ok(tokens)
    }

    /// The client it stands for.
    pub(crate) fn client(&self) -> &ClientId {
        &self.client
    }

    /// Whether `given` is this token, in time that does not depend on where they
    /// differ.
    pub(crate) fn matches(&self, given: &str) -> bool {
        same_secret(&self.secret, given)
    }
}

/// Whether `given` is `secret`, in time that does not depend on where they differ.
pub(crate) fn same_secret(secret: &str, given: &str) -> bool {
    let (a, b) = (secret.as_bytes(), given.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
