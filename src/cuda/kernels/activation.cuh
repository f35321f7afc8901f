LT_DEV float lt_act(float v, int act) {
  switch (act) {
    case 1: return v * 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
    case 2: return v < 0 ? 0.0f : v;
    case 3: return v / (1.0f + expf(-v));
    case 4: { float s = v * (float)(1.0 / 6.0) + 0.5f; return v * (s < 0 ? 0.0f : s > 1 ? 1.0f : s); }
    case 5: return tanhf(v);
    default: return v;
  }
}
LT_DEV double lt_act(double v, int act) {
  switch (act) {
    case 1: return v * 0.5 * (1.0 + erf(v * 0.70710678118654752440));
    case 2: return v < 0 ? 0.0 : v;
    case 3: return v / (1.0 + exp(-v));
    case 4: { double s = v * (1.0 / 6.0) + 0.5; return v * (s < 0 ? 0.0 : s > 1 ? 1.0 : s); }
    case 5: return tanh(v);
    default: return v;
  }
}
