//! Unit-test support shared across modules (compiled for tests only).

use std::convert::Infallible;
use std::future::Future;

use kube::client::Body;

/// A client whose every request `answer` serves with a status and a JSON
/// body: a narrow stand-in for the API server, for tests of one request
/// pattern. Real API servers are for the e2e tests.
pub fn stand_in_api<F, Fut>(answer: F) -> kube::Client
where
    F: Fn(http::Request<Body>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (u16, &'static str)> + Send + 'static,
{
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let answer = answer.clone();
        async move {
            let (status, body) = answer(req).await;
            let reply = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(body.as_bytes().to_vec()))
                .expect("a static response");
            Ok::<_, Infallible>(reply)
        }
    });
    kube::Client::new(service, "default")
}
