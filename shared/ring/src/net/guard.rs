//! The checks that run inside the HTTP client: a resolver that resolves only names the token
//! reaches, and a redirect policy that follows only URLs the token reaches. They are the second
//! line: even if the URL check before the request had a bug, no connection to an unlisted name
//! is made, because the client resolves through nothing else.
//!
//! Both record their refusal in a [`Refusals`] slot, from which `fetch` returns it as a typed
//! [`NetError`] (the client itself only sees an opaque error).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::{Action, Attempt, Policy};

use super::{MAX_REDIRECTS, NetError, scope};
use crate::tokens::NetToken;

/// Where the resolver and the redirect policy leave the first refusal of one fetch.
#[derive(Debug, Default, Clone)]
pub(super) struct Refusals(Arc<Mutex<Option<NetError>>>);

impl Refusals {
    /// Keeps the first refusal and returns the opaque error the client carries back.
    fn record(&self, err: NetError) -> Refused {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(err);
        }
        Refused
    }

    /// The refusal recorded during the fetch, if any.
    pub(super) fn take(&self) -> Option<NetError> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// What the client sees when a guard refuses; the typed error waits in [`Refusals`].
#[derive(Debug, thiserror::Error)]
#[error("refused by the l3m net token")]
struct Refused;

/// Resolves a name only if the token reaches it (on some port: the port was checked before
/// the request and at each redirect), through the system resolver.
#[derive(Debug)]
pub(super) struct TokenResolver {
    /// The token's rules, copied for the client's lifetime (one fetch).
    pub(super) token: Arc<NetToken>,
    /// Where a refusal goes.
    pub(super) refusals: Refusals,
}

impl Resolve for TokenResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        if !self.token.allows_name(&host) {
            let refused = self.refusals.record(NetError::ResolveRefused {
                listed: self.token.hosts().iter().cloned().collect(),
                host,
            });
            return Box::pin(async move { Err(refused.into()) });
        }
        let refusals = self.refusals.clone();
        Box::pin(async move {
            let looked_up = tokio::net::lookup_host((host.clone(), 0)).await;
            match looked_up {
                Ok(addrs) => {
                    let addrs: Vec<SocketAddr> = addrs.collect();
                    Ok(Box::new(addrs.into_iter()) as Addrs)
                }
                Err(source) => Err(refusals.record(NetError::Resolve { host, source }).into()),
            }
        })
    }
}

/// Follows at most [`MAX_REDIRECTS`] redirects, each only to a URL the token reaches.
pub(super) fn redirect_policy(token: Arc<NetToken>, refusals: Refusals) -> Policy {
    Policy::custom(move |attempt: Attempt| -> Action {
        let from = attempt
            .previous()
            .last()
            .map_or_else(String::new, |u| u.as_str().to_string());
        if attempt.previous().len() > MAX_REDIRECTS {
            let err = NetError::TooManyRedirects {
                url: attempt.url().as_str().into(),
                limit: MAX_REDIRECTS,
            };
            return attempt.error(refusals.record(err));
        }
        match scope::check(&token, attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(reason) => {
                let err = NetError::Redirect {
                    from,
                    to: attempt.url().as_str().into(),
                    reason: Box::new(reason),
                };
                attempt.error(refusals.record(err))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{MintInput, mint};

    fn resolver(hosts: &[&str]) -> TokenResolver {
        let input = MintInput {
            net: Some(hosts.iter().map(|h| h.to_string()).collect()),
            ..MintInput::default()
        };
        let token = mint(&input, cap_std::ambient_authority())
            .unwrap()
            .net
            .unwrap();
        TokenResolver {
            token: Arc::new(token),
            refusals: Refusals::default(),
        }
    }

    #[tokio::test]
    async fn the_resolver_resolves_listed_names_and_refuses_the_rest() {
        let r = resolver(&["localhost:8080"]);
        let addrs: Vec<_> = r
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()) && !addrs.is_empty());
        assert!(r.refusals.take().is_none());
        assert!(r.resolve("example.org".parse().unwrap()).await.is_err());
        assert!(matches!(
            r.refusals.take(),
            Some(NetError::ResolveRefused { ref host, .. }) if host == "example.org"
        ));
    }
}
