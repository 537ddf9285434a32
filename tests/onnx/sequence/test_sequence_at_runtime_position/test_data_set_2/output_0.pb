ByJap·¿éj}?
Lž=