2	a  b
2   2one