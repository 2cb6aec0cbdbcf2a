#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cblas.h>
int main(void){ int n=512; double *a=malloc(8*n*n),*b=malloc(8*n*n),*c=malloc(8*n*n); for(int i=0;i<n*n;i++){a[i]=1.0/(i+1);b[i]=1.0;}
 struct timespec t0,t1; double best=1e9; for(int r=0;r<5;r++){clock_gettime(CLOCK_MONOTONIC,&t0); cblas_dgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,n,n,n,1,a,n,b,n,0,c,n); clock_gettime(CLOCK_MONOTONIC,&t1); double s=(t1.tv_sec-t0.tv_sec)+1e-9*(t1.tv_nsec-t0.tv_nsec); if(s<best)best=s;}
 printf("%s dgemm 512^3 %.2f ms\n", openblas_get_config(), best*1e3); return 0; }
