use super::*;

/// At λ = 1.25 BA drives the output letter "1" out of the support: after ~4000 iterations
/// r("1") is subnormal and a stored entry is exactly 0. ε and MI must stay finite.
#[test]
fn vanishing_output_letter() {
    let p = [0.0513, 0.1538, 0.4872, 0.2051, 0.1026];
    let r = blahut_arimoto(&p, &Distortion::Hamming, 1.25, 1e-8, 1).unwrap();
    assert!(r.channel().q.contains(&0.0));
    assert!(
        r.epsilon.is_finite() && r.epsilon > 1.25 && r.epsilon < 3.0,
        "{}",
        r.epsilon
    );
    let mi = r.channel().mutual_information(&p);
    assert!((mi - r.mi).abs() < 1e-6, "{mi} vs {}", r.mi);
}
